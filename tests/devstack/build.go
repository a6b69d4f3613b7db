package devstack

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// ModulePath is the main module's path; ModuleRoot looks for its go.mod.
const ModulePath = "github.com/captchaflow/captchaflow"

// Binaries are the stack's executables, built from this module.
type Binaries struct {
	Worker    string
	Ingress   string
	Simulator string
	Starter   string
}

// binaryPackages are each binary's main package (the binary is named after the package's directory), by the
// module they build in, relative to the product's root: the simulator is in the tooling module, tests/.
var binaryPackages = map[string][]string{".": {"./worker", "./ingress", "./starter"}, "tests": {"./simulator"}}

var (
	buildMu   sync.Mutex
	builtDirs = map[string]Binaries{}
)

// BuildBinaries builds the worker, ingress, simulator and starter into dir, once per process and dir (tests that
// share a package share the build); Go's build cache makes a rebuild of unchanged code take about a second.
func BuildBinaries(ctx context.Context, dir string) (Binaries, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	dir, err := filepath.Abs(dir)
	if err != nil {
		return Binaries{}, err
	}
	if bins, ok := builtDirs[dir]; ok {
		return bins, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return Binaries{}, err
	}
	for mod, pkgs := range binaryPackages {
		if err := GoBuild(ctx, filepath.Join(root, mod), dir, pkgs...); err != nil {
			return Binaries{}, err
		}
	}
	bins := Binaries{
		Worker:    filepath.Join(dir, "worker"),
		Ingress:   filepath.Join(dir, "ingress"),
		Simulator: filepath.Join(dir, "simulator"),
		Starter:   filepath.Join(dir, "starter"),
	}
	builtDirs[dir] = bins
	return bins, nil
}

// BuildCommit builds the worker and ingress of commit (the release an upgrade starts from, or one to measure
// against) into dir, from a git worktree of it at a fixed path per commit and clone, removed afterwards, so Go's build
// cache makes every build after the first a relink. A commit this clone lacks is an error saying how to fetch it.
func BuildCommit(ctx context.Context, commit, dir string) (Binaries, error) {
	root, err := ModuleRoot()
	if err != nil {
		return Binaries{}, err
	}
	if out, err := exec.CommandContext(ctx, "git", "-C", root, "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
		return Binaries{}, fmt.Errorf("commit %s is not in this clone (fetch the history: git fetch --unshallow --tags): %w %s", commit, err, out)
	}
	clone := sha256.Sum256([]byte(root))
	tree := filepath.Join(os.TempDir(), fmt.Sprintf("captchaflow-build-%.12s-%x", commit, clone[:6]))
	remove := func() {
		_ = exec.Command("git", "-C", root, "worktree", "remove", "--force", tree).Run()
		_ = os.RemoveAll(tree)
	}
	remove() // a run killed before its cleanup
	if out, err := exec.CommandContext(ctx, "git", "-C", root, "worktree", "add", "-f", "--detach", tree, commit).CombinedOutput(); err != nil {
		return Binaries{}, fmt.Errorf("git worktree add %s: %w\n%s", commit, err, out)
	}
	defer remove()
	// Its own module only (GOWORK=off); no VCS stamp to read from a temporary worktree.
	if err := goBuild(ctx, tree, dir, []string{"GOWORK=off"}, "-buildvcs=false", "./worker", "./ingress"); err != nil {
		return Binaries{}, fmt.Errorf("building %s: %w", commit, err)
	}
	return Binaries{Worker: filepath.Join(dir, "worker"), Ingress: filepath.Join(dir, "ingress")}, nil
}

// GoBuild runs `go build -o dir/ pkgs...` in the module root; one invocation, so the packages build in parallel
// and share work. The error carries go's output.
func GoBuild(ctx context.Context, root, dir string, pkgs ...string) error {
	return goBuild(ctx, root, dir, nil, pkgs...)
}

// goBuild is GoBuild with env added to the environment and build flags allowed before the packages.
func goBuild(ctx context.Context, root, dir string, env []string, pkgs ...string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	args := append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir, cmd.Env = root, append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", strings.Join(pkgs, " "), err, out.String())
	}
	return nil
}

// ModuleRoot finds the directory of this module's go.mod, walking up from the working directory (tests run in
// their package's directory).
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if isModuleRoot(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("devstack: not inside the " + ModulePath + " module (no go.mod declaring it above the working directory)")
		}
		dir = parent
	}
}

func isModuleRoot(goMod string) bool {
	f, err := os.Open(goMod)
	if err != nil {
		return false
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		if fields := strings.Fields(scanner.Text()); len(fields) == 2 && fields[0] == "module" {
			return fields[1] == ModulePath
		}
	}
	return false
}

// TemporalCLIPath is $TEMPORAL_CLI, else .bin/temporal in the module root (where `make cli` puts it): the
// command-line client only; the stack runs TemporalServerPath.
func TemporalCLIPath() (string, error) { return toolPath(os.Getenv("TEMPORAL_CLI"), "temporal") }

// TemporalServerPath is $TEMPORAL_SERVER, else .bin/temporal-server in the module root (where tools/build.sh puts
// it, with temporal-sql-tool and temporal-ui beside it).
func TemporalServerPath() (string, error) {
	return toolPath(os.Getenv("TEMPORAL_SERVER"), "temporal-server")
}

// toolPath is override, else .bin/name in the module root.
func toolPath(override, name string) (string, error) {
	if override != "" {
		return override, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, ".bin", name), nil
}
