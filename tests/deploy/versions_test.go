package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// docServerVersion finds where a doc names a Temporal server version ("Temporal Server 1.2.3", "server v1.2.3").
var docServerVersion = regexp.MustCompile(`(?i)server v?(\d+\.\d+\.\d+)`)

// The server version is pinned once, in tools/server/go.mod (make run, the e2e suites and the PostgreSQL cluster
// all run that build); the compose images of the same server and docs/versions.md, the one document naming it,
// follow it.
func TestClusterServerVersionAgrees(t *testing.T) {
	mod, err := os.ReadFile(filepath.Join(repoRoot, "tools/server/go.mod"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^\s*go\.temporal\.io/server v(\S+)`).FindSubmatch(mod)
	require.NotNil(t, m, "tools/server/go.mod requires no go.temporal.io/server")
	want := string(m[1])

	p, err := loadCompose(composeFile, testEnv())
	require.NoError(t, err)
	for _, name := range []string{"temporal-schema", "temporal", "temporal-namespace"} {
		image := p.Services[name].Image
		assert.Equal(t, want, image[strings.LastIndex(image, ":")+1:], "compose service %s runs %s", name, image)
	}
	for _, doc := range []string{"docs/versions.md"} {
		text, err := os.ReadFile(filepath.Join(repoRoot, doc))
		require.NoError(t, err)
		named := docServerVersion.FindAllSubmatch(text, -1)
		assert.NotEmpty(t, named, "%s names no Temporal server version", doc)
		for _, v := range named {
			assert.Equal(t, want, string(v[1]), "%s names Temporal server %s", doc, v[1])
		}
	}
}
