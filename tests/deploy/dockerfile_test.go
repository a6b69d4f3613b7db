package deploy

import (
	"bufio"
	"bytes"
	"fmt"
	"go/build"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	dockerfilePath   = "../../Dockerfile"
	dockerignorePath = "../../.dockerignore"
	binDir           = "/usr/local/bin/"
)

// imageBinaries are the commands the image must contain: the services compose runs from it, plus the starter CLI.
var imageBinaries = []string{"worker", "ingress", "starter", "simulator"}

// toolingBinaries are the image's commands from the tooling module, which the Dockerfile builds with go -C tests.
var toolingBinaries = []string{"simulator"}

// dockerStage is one FROM … section of a parsed Dockerfile.
type dockerStage struct {
	image, name  string
	instructions []*parser.Node
}

func parseDockerfile(content []byte) ([]dockerStage, error) {
	res, err := parser.Parse(bytes.NewReader(content))
	if err != nil {
		return nil, err
	}
	var stages []dockerStage
	for _, n := range res.AST.Children {
		if strings.EqualFold(n.Value, "from") {
			st := dockerStage{}
			if n.Next != nil {
				st.image = n.Next.Value
				if as := n.Next.Next; as != nil && strings.EqualFold(as.Value, "as") && as.Next != nil {
					st.name = as.Next.Value
				}
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) == 0 {
			continue // ARG before the first FROM
		}
		stages[len(stages)-1].instructions = append(stages[len(stages)-1].instructions, n)
	}
	if len(stages) == 0 {
		return nil, fmt.Errorf("no FROM")
	}
	return stages, nil
}

// args joins an instruction's arguments (RUN's shell text, COPY's paths, USER's name).
func args(n *parser.Node) string {
	var parts []string
	for a := n.Next; a != nil; a = a.Next {
		parts = append(parts, a.Value)
	}
	return strings.Join(parts, " ")
}

// checkDockerfile returns every way the Dockerfile misses the image's contract.
func checkDockerfile(content []byte) []string {
	stages, err := parseDockerfile(content)
	if err != nil {
		return []string{fmt.Sprintf("Dockerfile does not parse: %v", err)}
	}
	var problems []string
	fail := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }

	var stageNames []string
	for _, st := range stages {
		if !slices.Contains(stageNames, st.image) && st.image != "scratch" {
			problems = append(problems, checkImage("Dockerfile FROM", st.image, false)...)
		}
		stageNames = append(stageNames, st.name)
	}

	// The build: static binaries of every command, into the directory the runtime stage copies.
	var built []string
	toolingBuilt := false
	for _, st := range stages[:len(stages)-1] {
		for _, n := range st.instructions {
			run := args(n)
			if !strings.EqualFold(n.Value, "run") || !strings.Contains(run, "go build") {
				continue
			}
			if !strings.Contains(run, "CGO_ENABLED=0") {
				fail("the go build in stage %q is not static: set CGO_ENABLED=0", st.name)
			}
			for _, f := range strings.Fields(run) {
				if strings.HasPrefix(f, "./") {
					built = append(built, strings.TrimPrefix(f, "./"))
				}
			}
			toolingBuilt = toolingBuilt || strings.Contains(run, "go -C tests build")
		}
	}
	for _, b := range imageBinaries {
		if !slices.Contains(built, b) {
			fail("the image does not build ./%s", b)
		}
	}
	if !toolingBuilt {
		fail("the image does not build the tooling module's commands (%v) with go -C tests", toolingBinaries)
	}

	final := stages[len(stages)-1]
	var user string
	copiesBinaries := false
	for _, n := range final.instructions {
		switch strings.ToLower(n.Value) {
		case "user":
			user = args(n)
		case "copy":
			copiesBinaries = copiesBinaries || strings.HasSuffix(args(n), " "+binDir)
		}
	}
	if name, _, _ := strings.Cut(user, ":"); name == "" || name == "root" || name == "0" {
		fail("the final stage runs as %q; run as a non-root user", user)
	}
	if !copiesBinaries {
		fail("the final stage does not copy the binaries into %s", binDir)
	}
	return problems
}

func TestDockerfileBuildsEveryBinaryStaticallyAndRunsAsNonRoot(t *testing.T) {
	content, err := os.ReadFile(dockerfilePath)
	require.NoError(t, err)
	assert.Empty(t, checkDockerfile(content))
}

// Every package the image builds is a command that exists, and every service compose runs from the image is one
// of them.
func TestDockerfileBinariesExist(t *testing.T) {
	for _, b := range imageBinaries {
		dir := filepath.Join(repoRoot, b)
		if slices.Contains(toolingBinaries, b) {
			dir = filepath.Join(repoRoot, "tests", b)
		}
		pkg, err := build.ImportDir(dir, 0)
		if assert.NoError(t, err, "./%s", b) {
			assert.Equal(t, "main", pkg.Name, "./%s must be a command", b)
		}
	}
	p, err := loadCompose(composeFile, testEnv())
	require.NoError(t, err)
	for name, svc := range p.Services {
		if svc.Build == nil {
			continue
		}
		require.NotEmpty(t, svc.Command, "service %s must name the binary to run", name)
		assert.Contains(t, imageBinaries, svc.Command[0], "service %s runs a binary the image lacks", name)
	}
}

func TestDockerignoreKeepsLocalStateOut(t *testing.T) {
	f, err := os.Open(dockerignorePath)
	require.NoError(t, err)
	defer f.Close()
	var patterns []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" && !strings.HasPrefix(line, "#") {
			patterns = append(patterns, line)
		}
	}
	require.NoError(t, sc.Err())
	for _, p := range []string{".git", ".bin", ".data"} {
		assert.Contains(t, patterns, p)
	}
}

func TestDockerfileChecksCatchBrokenFiles(t *testing.T) {
	original, err := os.ReadFile(dockerfilePath)
	require.NoError(t, err)
	mutations := []struct{ name, from, to string }{
		{"unpinned builder", "FROM golang:1.26.8 AS build", "FROM golang AS build"},
		{"latest runtime", "FROM alpine:3.22.2", "FROM alpine:latest"},
		{"root user", "USER 10001:10001", "USER root"},
		{"no user", "USER 10001:10001\n", ""},
		{"cgo on", "CGO_ENABLED=0 ", ""},
		{"a binary left out", " ./starter", ""},
		{"the simulator built in the product module", "go -C tests build", "go build"},
		{"binaries elsewhere", "COPY --from=build /out/ /usr/local/bin/", "COPY --from=build /out/ /opt/"},
	}
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			require.Contains(t, string(original), m.from, "mutation no longer applies; update it")
			mutated := strings.Replace(string(original), m.from, m.to, 1)
			assert.NotEmpty(t, checkDockerfile([]byte(mutated)), "the checks missed: %s", m.name)
		})
	}
}
