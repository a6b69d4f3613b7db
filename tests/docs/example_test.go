package docs_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/tests/internal/docscheck"
)

// goExampleFrame makes the README's Go example a program: the imports it uses and the ctx it assumes.
const goExampleFrame = `package main

import (
	"context"
	"log"

	"go.temporal.io/sdk/client"

	"github.com/captchaflow/captchaflow"
)

func main() {
	ctx := context.Background()
%s	_, _ = res, err
}
`

// The README's Go example compiles against the current contract. It is built through an overlay, so nothing is
// written into the module.
func TestREADMEGoExampleCompiles(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	example, err := docscheck.CodeBlock(read(t, "README.md"), "go-start")
	require.NoError(t, err)
	abs, err := filepath.Abs(root)
	require.NoError(t, err)
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	require.NoError(t, os.WriteFile(src, []byte(fmt.Sprintf(goExampleFrame, example)), 0o644))
	// A package directory that exists only in the overlay.
	pkg := filepath.Join(abs, "docs", "readme_go_example")
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(pkg, "main.go"): src}})
	require.NoError(t, err)
	overlayFile := filepath.Join(dir, "overlay.json")
	require.NoError(t, os.WriteFile(overlayFile, overlay, 0o644))
	cmd := exec.Command("go", "build", "-overlay", overlayFile, "-o", os.DevNull, "./docs/readme_go_example")
	cmd.Dir = abs
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the README's Go example does not compile:\n%s", out)
}
