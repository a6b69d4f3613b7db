package deploy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/caarlos0/env/v11"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/contrib/envconfig"

	"github.com/captchaflow/captchaflow/internal/config"
	"github.com/captchaflow/captchaflow/simulator/sim"
)

// temporalGRPCMetaPrefix: envconfig turns every TEMPORAL_GRPC_META_<NAME> variable into a gRPC header.
const temporalGRPCMetaPrefix = "TEMPORAL_GRPC_META_"

// binaryEnv is what one binary reads from its environment.
type binaryEnv struct {
	// known holds every variable name the binary reads.
	known map[string]bool
	// prefixes are name prefixes read as a family (any suffix).
	prefixes []string
	// required must be set and non-empty, or the binary refuses to start (or, for Temporal's address, talks to
	// localhost).
	required []string
}

func (b binaryEnv) reads(name string) bool {
	if b.known[name] {
		return true
	}
	for _, p := range b.prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// binaries maps each compose service running one of our binaries to what that binary reads.
func binaries(t *testing.T) map[string]binaryEnv {
	t.Helper()
	temporal := temporalClientEnv(t)
	worker := merge(t, structEnv(t, &config.Worker{}), temporal, directEnv(t, "../worker"))
	ingress := merge(t, structEnv(t, &config.Ingress{}), temporal, directEnv(t, "../ingress"))
	simulator := merge(t, structEnv(t, &sim.Config{}), directEnv(t, "../simulator"))
	// A compose file that leaves these out points the client at localhost:7233 inside the container.
	worker.required = append(worker.required, "TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE")
	ingress.required = append(ingress.required, "TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE")
	return map[string]binaryEnv{"worker": worker, "ingress": ingress, "simulator": simulator}
}

func merge(t *testing.T, parts ...binaryEnv) binaryEnv {
	t.Helper()
	out := binaryEnv{known: map[string]bool{}}
	for _, p := range parts {
		for k := range p.known {
			out.known[k] = true
		}
		out.prefixes = append(out.prefixes, p.prefixes...)
		out.required = append(out.required, p.required...)
	}
	require.NotEmpty(t, out.known)
	return out
}

// structEnv reads the `env` tags of a caarlos0/env config struct with that library's own tag parser.
func structEnv(t *testing.T, cfg any) binaryEnv {
	t.Helper()
	params, err := env.GetFieldParams(cfg)
	require.NoError(t, err)
	out := binaryEnv{known: map[string]bool{}}
	for _, p := range params {
		out.known[p.Key] = true
		if p.Required || p.NotEmpty {
			out.required = append(out.required, p.Key)
		}
	}
	return out
}

// recordingEnv is an envconfig.EnvLookup that records every variable the SDK asks for.
type recordingEnv struct {
	asked      map[string]bool
	configFile string
}

func (r *recordingEnv) LookupEnv(key string) (string, bool) {
	r.asked[key] = true
	if key == "TEMPORAL_CONFIG_FILE" {
		// A file that does not exist: the SDK then reads no user config, and the test stays hermetic.
		return r.configFile, true
	}
	return "", false
}

func (r *recordingEnv) Environ() []string { return nil }

// temporalClientEnv is what envconfig.LoadDefaultClientOptions (used by the worker and the ingress) reads,
// found by asking the SDK itself rather than copying its documentation.
func temporalClientEnv(t *testing.T) binaryEnv {
	t.Helper()
	rec := &recordingEnv{asked: map[string]bool{}, configFile: filepath.Join(t.TempDir(), "absent.toml")}
	_, err := envconfig.LoadClientOptions(envconfig.LoadClientOptionsRequest{EnvLookup: rec})
	require.NoError(t, err)
	require.True(t, rec.asked["TEMPORAL_ADDRESS"], "envconfig no longer reads TEMPORAL_ADDRESS?")
	return binaryEnv{known: rec.asked, prefixes: []string{temporalGRPCMetaPrefix}}
}

// directEnv finds the variables a main package reads itself, outside any config struct: string literals passed
// to os.Getenv / os.LookupEnv, or to a function of the package that hands its first parameter to one of them
// (an `envOr(name, fallback)` helper).
func directEnv(t *testing.T, dir string) binaryEnv {
	t.Helper()
	fset := token.NewFileSet()
	var files []*ast.File
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		require.NoError(t, err)
		files = append(files, f)
	}
	require.NotEmpty(t, files, "no Go files in %s", dir)

	isOSLookup := func(call *ast.CallExpr) bool {
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return false
		}
		pkg, ok := sel.X.(*ast.Ident)
		return ok && pkg.Name == "os" && (sel.Sel.Name == "Getenv" || sel.Sel.Name == "LookupEnv")
	}
	wrappers := map[string]bool{}
	for _, f := range files {
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil || fn.Type.Params == nil || len(fn.Type.Params.List) == 0 ||
				len(fn.Type.Params.List[0].Names) == 0 {
				continue
			}
			param := fn.Type.Params.List[0].Names[0].Name
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok && isOSLookup(call) && len(call.Args) > 0 {
					if id, ok := call.Args[0].(*ast.Ident); ok && id.Name == param {
						wrappers[fn.Name.Name] = true
					}
				}
				return true
			})
		}
	}
	out := binaryEnv{known: map[string]bool{}}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			id, isIdent := call.Fun.(*ast.Ident)
			if !isOSLookup(call) && !(isIdent && wrappers[id.Name]) {
				return true
			}
			if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				name, err := strconv.Unquote(lit.Value)
				require.NoError(t, err)
				out.known[name] = true
			}
			return true
		})
	}
	return out
}

func TestBinaryEnvIsDerivedFromTheCode(t *testing.T) {
	b := binaries(t)
	// Spot checks that each source of names is really read, so a broken derivation cannot pass silently.
	require.True(t, b["worker"].reads("CALLBACK_BASE_URL"), "from config.Worker")
	require.True(t, b["worker"].reads("LOG_LEVEL"), "read by worker/main.go via os.Getenv")
	require.True(t, b["worker"].reads("TEMPORAL_NAMESPACE"), "from envconfig")
	require.True(t, b["worker"].reads("TEMPORAL_GRPC_META_X_TENANT"), "envconfig's header family")
	require.True(t, b["ingress"].reads("INGRESS_ADDR"), "from config.Ingress")
	require.False(t, b["ingress"].reads("CAPTCHAAI_API_KEY"), "the ingress never sees the provider key")
	require.True(t, b["simulator"].reads("SIM_ADDR"), "from sim.Config")
	require.True(t, b["simulator"].reads("SIM_LOG_LEVEL"), "read by simulator/main.go via envOr")
	require.Contains(t, b["worker"].required, "CALLBACK_SECRET")
	require.Contains(t, b["ingress"].required, "CALLBACK_SECRET")
}
