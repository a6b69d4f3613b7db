package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/tests/devstack"
)

// required is the version goMod (a path from the repository root) requires of module.
func required(t *testing.T, goMod, module string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(module) + `\s+(v\S+)`).FindStringSubmatch(read(t, goMod))
	require.NotNil(t, m, "%s requires no %s", goMod, module)
	return m[1]
}

// TestVersionsDocumentNamesThePinnedModules holds docs/versions.md to the go.mod files, the toolchain build.sh
// uses, and the SQLite schema devstack stamps.
func TestVersionsDocumentNamesThePinnedModules(t *testing.T) {
	doc := read(t, "docs/versions.md")
	for _, pin := range []struct{ goMod, module string }{
		{"tools/server/go.mod", "go.temporal.io/server"},
		{"tools/ui/go.mod", "github.com/temporalio/ui-server/v2"},
		{"tools/ui/go.mod", "go.temporal.io/api"},
		{"tools/go.mod", "github.com/temporalio/cli"},
	} {
		assert.Contains(t, doc, "`"+pin.module+" "+required(t, pin.goMod, pin.module)+"`", pin.goMod)
	}

	toolchain := regexp.MustCompile(`(?m)^server_toolchain=(go\S+)$`).FindStringSubmatch(read(t, "tools/build.sh"))
	require.NotNil(t, toolchain, "tools/build.sh names server_toolchain")
	assert.Contains(t, doc, "`"+toolchain[1]+"`")
	for _, goMod := range []string{"tools/server/go.mod", "tools/ui/go.mod"} {
		goLine := regexp.MustCompile(`(?m)^go (\S+)$`).FindStringSubmatch(read(t, goMod))
		require.NotNil(t, goLine, goMod)
		assert.Equal(t, toolchain[1], "go"+goLine[1], "build.sh's toolchain is %s's go line", goMod)
	}
	assert.Contains(t, doc, "`"+devstack.SQLiteSchemaVersion+"`")
}

// TestSQLiteSchemaVersionIsTheServers: the schema devstack stamps a new database with is the pinned server's
// (its schema/sqlite/version.go, in the module cache once tools/build.sh has built it).
func TestSQLiteSchemaVersionIsTheServers(t *testing.T) {
	modCache := os.Getenv("GOMODCACHE")
	if modCache == "" {
		modCache = filepath.Join(os.Getenv("HOME"), "go", "pkg", "mod")
		if gopath := os.Getenv("GOPATH"); gopath != "" {
			modCache = filepath.Join(strings.Split(gopath, string(os.PathListSeparator))[0], "pkg", "mod")
		}
	}
	file := filepath.Join(modCache, "go.temporal.io", "server@"+required(t, "tools/server/go.mod", "go.temporal.io/server"),
		"schema", "sqlite", "version.go")
	src, err := os.ReadFile(file)
	if err != nil && os.Getenv("CI") == "" {
		t.Skipf("the server module is not in the module cache (tools/build.sh fetches it): %v", err)
	}
	require.NoError(t, err)
	m := regexp.MustCompile(`const Version = "([^"]+)"`).FindStringSubmatch(string(src))
	require.NotNil(t, m, file)
	assert.Equal(t, m[1], devstack.SQLiteSchemaVersion)
}
