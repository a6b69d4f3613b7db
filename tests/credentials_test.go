package tests

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"strings"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"

	"github.com/captchaflow/captchaflow/codec"
	"github.com/captchaflow/captchaflow/tests/devstack"
)

// envExternalCredentials names a command, run in the module root with PARTY ROLE TTL, that prints the TEMPORAL_*
// settings (certificate, token) of a client of the external server, NAME=VALUE a line: cluster/client-env.sh.
const envExternalCredentials = "E2E_TEMPORAL_CREDENTIALS"

// The roles the tests play on a server that authorizes (cluster/mint-token.sh), and the certificate each holds.
const (
	roleCaptchaflow = "captchaflow-worker" // the worker, the ingress and the harness's own client
	roleShop        = "shop-worker"        // the caller team
	roleOperator    = "operator"
	roleAdmin       = "admin" // the endpoint and namespace set-up
)

var roleParty = map[string]string{roleCaptchaflow: "captchaflow", roleShop: "shop", roleOperator: "operator", roleAdmin: "admin"}

// credentialTTL outlives the longest e2e run: the worker and the ingress keep the token they started with.
const credentialTTL = "7200"

// loadCredentials asks envExternalCredentials for every role; nil when it is unset (no authorization).
func loadCredentials(ctx context.Context) (map[string]map[string]string, error) {
	command := os.Getenv(envExternalCredentials)
	if command == "" {
		return nil, nil
	}
	root, err := devstack.ModuleRoot()
	if err != nil {
		return nil, err
	}
	creds := map[string]map[string]string{}
	for role, party := range roleParty {
		cmd := exec.CommandContext(ctx, "sh", "-c", command+` "$@"`, "credentials", party, role, credentialTTL)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("%s %s %s: %w", envExternalCredentials, party, role, err)
		}
		creds[role] = parseEnvLines(out)
	}
	return creds, nil
}

func parseEnvLines(out []byte) map[string]string {
	env := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			env[k] = v
		}
	}
	return env
}

// clientEnv is role's TEMPORAL_* settings, nil on a server that does not authorize.
func (s *stack) clientEnv(role string) map[string]string { return s.creds[role] }

// withCredentials is env plus role's settings (a copy).
func (s *stack) withCredentials(env map[string]string, role string) map[string]string {
	out := maps.Clone(env)
	maps.Copy(out, s.clientEnv(role))
	return out
}

// envLines is env as NAME=VALUE entries, for exec.Cmd.Env.
func envLines(env map[string]string) (lines []string) {
	for k, v := range env {
		lines = append(lines, k+"="+v)
	}
	return lines
}

// mapEnv is an envconfig.EnvLookup over a map: the SDK reads a role's settings as the binaries read theirs.
type mapEnv map[string]string

func (m mapEnv) LookupEnv(key string) (string, bool) {
	if key == "TEMPORAL_CONFIG_FILE" {
		return os.DevNull, true // no user config file: the answer does not depend on the machine
	}
	v, ok := m[key]
	return v, ok
}

func (m mapEnv) Environ() []string { return envLines(m) }

// clientOptions are the options of a client of namespace playing role (TLS and token where the server wants them).
func (s *stack) clientOptions(role, namespace string) (client.Options, error) {
	env := mapEnv(s.withCredentials(map[string]string{"TEMPORAL_ADDRESS": s.temporalAddr, "TEMPORAL_NAMESPACE": namespace}, role))
	opts, err := envconfig.LoadClientOptions(envconfig.LoadClientOptionsRequest{EnvLookup: env})
	if err != nil {
		return opts, err
	}
	opts.Logger = devstack.QuietSDKLogger()
	_, err = codec.Configure(&opts, s.keysFile, nil) // the suite runs encrypted
	return opts, err
}

// dialAs connects a client of namespace playing role.
func (s *stack) dialAs(ctx context.Context, role, namespace string) (client.Client, error) {
	opts, err := s.clientOptions(role, namespace)
	if err != nil {
		return nil, err
	}
	return client.DialContext(ctx, opts)
}
