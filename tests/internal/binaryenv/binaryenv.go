// Package binaryenv derives from the code which environment variables each captchaflow binary reads, so that
// the deployment files and the configuration reference can be checked against one list that nobody writes by
// hand. It is used by tests only.
package binaryenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/caarlos0/env/v11"
	"go.temporal.io/sdk/contrib/envconfig"

	"github.com/captchaflow/captchaflow/codec"
	"github.com/captchaflow/captchaflow/internal/config"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

// TemporalGRPCMetaPrefix names a family: envconfig turns every TEMPORAL_GRPC_META_<NAME> variable into a gRPC
// header.
const TemporalGRPCMetaPrefix = "TEMPORAL_GRPC_META_"

// OTelPrefix names the OpenTelemetry SDK's family (internal/telemetry): OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_BSP_*, ….
const OTelPrefix = "OTEL_"

// Env is what one binary reads from its environment.
type Env struct {
	// Known holds every variable name the binary reads.
	Known map[string]bool
	// Prefixes are name prefixes read as a family (any suffix).
	Prefixes []string
	// Required must be set and non-empty, or the binary refuses to start.
	Required []string
}

// Reads tells whether the binary reads name, by itself or as a member of a family.
func (e Env) Reads(name string) bool {
	if e.Known[name] {
		return true
	}
	for _, p := range e.Prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// Names are the known variable names, sorted.
func (e Env) Names() []string {
	out := make([]string, 0, len(e.Known))
	for k := range e.Known {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Binaries maps each binary (worker, ingress, simulator, starter, run) to what it reads; root is the repository's root.
// Temporal's connection settings come from the SDK's envconfig in the worker, the ingress and the starter.
func Binaries(root string) (map[string]Env, error) {
	temporal, err := TemporalClient()
	if err != nil {
		return nil, err
	}
	parts := map[string][]func() (Env, error){
		"worker":    {structOf(&config.Worker{}), direct(root, "worker")},
		"ingress":   {structOf(&config.Ingress{}), direct(root, "ingress")},
		"simulator": {structOf(&sim.Config{}), direct(root, "tests/simulator")},
		"starter":   {direct(root, "starter")},
		// run starts the stack through devstack, which finds temporal-server by TEMPORAL_SERVER (the CLI by TEMPORAL_CLI).
		"run": {direct(root, "tests/run"), direct(root, "tests/devstack")},
	}
	out := map[string]Env{}
	for name, fns := range parts {
		var envs []Env
		for _, fn := range fns {
			e, err := fn()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			envs = append(envs, e)
		}
		if name == "worker" || name == "ingress" || name == "starter" { // each dials through config.ClientOptions
			envs = append(envs, temporal, Env{Prefixes: []string{OTelPrefix}, Known: map[string]bool{codec.KeysFileEnv: true, config.CompressionEnv: true}})
		}
		out[name] = Merge(envs...)
	}
	return out, nil
}

func structOf(cfg any) func() (Env, error) { return func() (Env, error) { return Struct(cfg) } }

func direct(root, dir string) func() (Env, error) {
	return func() (Env, error) { return Direct(filepath.Join(root, dir)) }
}

// Merge is the union of parts.
func Merge(parts ...Env) Env {
	out := Env{Known: map[string]bool{}}
	for _, p := range parts {
		for k := range p.Known {
			out.Known[k] = true
		}
		out.Prefixes = append(out.Prefixes, p.Prefixes...)
		out.Required = append(out.Required, p.Required...)
	}
	return out
}

// Struct reads the `env` tags of a caarlos0/env config struct with that library's own tag parser.
func Struct(cfg any) (Env, error) {
	params, err := env.GetFieldParams(cfg)
	if err != nil {
		return Env{}, err
	}
	out := Env{Known: map[string]bool{}}
	for _, p := range params {
		out.Known[p.Key] = true
		if p.Required || p.NotEmpty {
			out.Required = append(out.Required, p.Key)
		}
	}
	return out, nil
}

// recordingEnv is an envconfig.EnvLookup that records every variable the SDK asks for.
type recordingEnv struct {
	asked      map[string]bool
	configFile string
}

func (r *recordingEnv) LookupEnv(key string) (string, bool) {
	r.asked[key] = true
	if key == "TEMPORAL_CONFIG_FILE" {
		// A file that does not exist: the SDK then reads no user config, and the answer does not depend on
		// the machine.
		return r.configFile, true
	}
	return "", false
}

func (r *recordingEnv) Environ() []string { return nil }

// TemporalClient is what envconfig.LoadDefaultClientOptions reads, found by asking the SDK itself rather than
// copying its documentation.
func TemporalClient() (Env, error) {
	dir, err := os.MkdirTemp("", "binaryenv-*")
	if err != nil {
		return Env{}, err
	}
	defer os.RemoveAll(dir)
	rec := &recordingEnv{asked: map[string]bool{}, configFile: filepath.Join(dir, "absent.toml")}
	if _, err := envconfig.LoadClientOptions(envconfig.LoadClientOptionsRequest{EnvLookup: rec}); err != nil {
		return Env{}, err
	}
	if !rec.asked["TEMPORAL_ADDRESS"] {
		return Env{}, errors.New("envconfig no longer reads TEMPORAL_ADDRESS: the recording lookup is not used")
	}
	return Env{Known: rec.asked, Prefixes: []string{TemporalGRPCMetaPrefix}}, nil
}
