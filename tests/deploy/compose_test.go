package deploy

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/captchaflow/captchaflow/tests/internal/binaryenv"
)

const (
	repoRoot         = "../.."
	composeFile      = "../../docker-compose.yml"
	prometheusConfig = "../../deploy/prometheus/prometheus.yml"
	loopback         = "127.0.0.1"
)

// composeSecrets are the variables docker-compose.yml must demand (${VAR:?…}) instead of defaulting.
var composeSecrets = []string{"CALLBACK_SECRET", "NOTIFY_SECRET", "CAPTCHAAI_API_KEY", "POSTGRES_PASSWORD"}

// testEnv is the environment the compose file is loaded with: the secrets and nothing from the test process.
func testEnv() map[string]string {
	return map[string]string{
		"CALLBACK_SECRET":   "test-callback-secret",
		"NOTIFY_SECRET":     "test-notify-secret",
		"CAPTCHAAI_API_KEY": "simulator0dev0key000000000000000",
		"POSTGRES_PASSWORD": "test-postgres-password",
	}
}

// services every deployment has, and the profile that enables the optional ones ("" = always on).
var expectedServices = map[string]string{
	"postgresql":         "",
	"temporal-schema":    "",
	"temporal":           "",
	"temporal-namespace": "",
	"temporal-ui":        "",
	"worker":             "",
	"ingress":            "",
	"simulator":          "simulator",
	"prometheus":         "monitoring",
}

// listenAddrVar names, per service running one of our binaries, the variable holding its listen address.
var listenAddrVar = map[string]string{
	"worker":    "WORKER_METRICS_ADDR",
	"ingress":   "INGRESS_ADDR",
	"simulator": "SIM_ADDR",
}

// metricsAddrVar names, per service Prometheus scrapes, the variable holding its /metrics address. The ingress
// serves /metrics on a listener of its own, never on the public callback one.
var metricsAddrVar = map[string]string{
	"worker":  "WORKER_METRICS_ADDR",
	"ingress": "INGRESS_METRICS_ADDR",
}

type dependency struct {
	on        string
	condition string
	required  bool
}

// expectedDependsOn is the start order: database → schema job → server → namespace job → our services.
var expectedDependsOn = map[string][]dependency{
	"temporal-schema":    {{"postgresql", types.ServiceConditionHealthy, true}},
	"temporal":           {{"postgresql", types.ServiceConditionHealthy, true}, {"temporal-schema", types.ServiceConditionCompletedSuccessfully, true}},
	"temporal-namespace": {{"temporal", types.ServiceConditionHealthy, true}},
	"temporal-ui":        {{"temporal", types.ServiceConditionHealthy, true}},
	"worker":             {{"temporal-namespace", types.ServiceConditionCompletedSuccessfully, true}, {"simulator", types.ServiceConditionHealthy, false}},
	"ingress":            {{"temporal-namespace", types.ServiceConditionCompletedSuccessfully, true}},
}

// loadCompose loads a compose file the way `docker compose --profile '*'` does, with only env set.
func loadCompose(path string, env map[string]string) (*types.Project, error) {
	return loadComposeProfiles(path, env, []string{"*"})
}

// loadComposeProfiles loads a compose file with only env set and only the given profiles enabled.
func loadComposeProfiles(path string, env map[string]string, profiles []string) (*types.Project, error) {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		return nil, err
	}
	list := make([]string, 0, len(env))
	for k, v := range env {
		list = append(list, k+"="+v)
	}
	opts, err := cli.NewProjectOptions([]string{path},
		cli.WithWorkingDirectory(root),
		cli.WithEnv(list),
		cli.WithProfiles(profiles),
	)
	if err != nil {
		return nil, err
	}
	return opts.LoadProject(context.Background())
}

// checkCompose returns every way the project disagrees with the binaries and the intended topology.
func checkCompose(t *testing.T, p *types.Project) []string {
	t.Helper()
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	for name, profile := range expectedServices {
		svc, ok := p.Services[name]
		if !ok {
			fail("service %s is missing", name)
			continue
		}
		if profile == "" && len(svc.Profiles) > 0 {
			fail("service %s must always run, but has profiles %v", name, svc.Profiles)
		}
		if profile != "" && !slices.Equal(svc.Profiles, []string{profile}) {
			fail("service %s must run only under profile %q, has %v", name, profile, svc.Profiles)
		}
	}

	for name, svc := range p.Services {
		problems = append(problems, checkImage("service "+name, svc.Image, svc.Build != nil)...)
		for _, port := range svc.Ports {
			if port.HostIP != loopback {
				fail("service %s publishes %d on %q; publish on %s only", name, port.Target, port.HostIP, loopback)
			}
		}
		for _, v := range svc.Volumes {
			if v.Type != types.VolumeTypeBind {
				continue
			}
			if _, err := os.Stat(v.Source); err != nil {
				fail("service %s mounts %s, which does not exist", name, v.Source)
				continue
			}
			// A script the service runs from the mount must be in the mounted directory.
			for _, arg := range slices.Concat(svc.Entrypoint, svc.Command) {
				if rel, ok := strings.CutPrefix(arg, v.Target+"/"); ok {
					if _, err := os.Stat(filepath.Join(v.Source, rel)); err != nil {
						fail("service %s runs %s, but %s has no %s", name, arg, v.Source, rel)
					}
				}
			}
		}
		for dep, d := range svc.DependsOn {
			target, ok := p.Services[dep]
			if !ok {
				fail("service %s depends on unknown service %s", name, dep)
				continue
			}
			switch d.Condition {
			case types.ServiceConditionHealthy:
				if target.HealthCheck == nil || target.HealthCheck.Disable || len(target.HealthCheck.Test) == 0 {
					fail("service %s waits for %s to be healthy, but %s has no health check", name, dep, dep)
				}
			case types.ServiceConditionCompletedSuccessfully:
				if target.Restart != "" && target.Restart != types.RestartPolicyNo {
					fail("service %s waits for %s to complete, but %s restarts (%s)", name, dep, dep, target.Restart)
				}
			}
		}
	}
	for name, want := range expectedDependsOn {
		svc, ok := p.Services[name]
		if !ok {
			continue
		}
		for _, w := range want {
			got, ok := svc.DependsOn[w.on]
			switch {
			case !ok:
				fail("service %s must depend on %s (%s)", name, w.on, w.condition)
			case got.Condition != w.condition:
				fail("service %s depends on %s with condition %s, want %s", name, w.on, got.Condition, w.condition)
			case got.Required != w.required:
				fail("service %s depends on %s with required=%v, want %v", name, w.on, got.Required, w.required)
			}
		}
	}

	bins := binaries(t)
	listenPorts := map[string]string{}
	for name, b := range bins {
		svc, ok := p.Services[name]
		if !ok {
			continue
		}
		problems = append(problems, checkEnv(name, svc, b)...)
		port, portProblems := checkListen(name, svc)
		problems = append(problems, portProblems...)
		listenPorts[name] = port
	}

	worker, simulator := p.Services["worker"], p.Services["simulator"]
	if cb := envValue(worker, "CALLBACK_BASE_URL"); cb != "" {
		u, err := url.Parse(cb)
		switch {
		case err != nil:
			fail("worker CALLBACK_BASE_URL %q does not parse: %v", cb, err)
		case u.Hostname() != "ingress" || u.Port() != listenPorts["ingress"]:
			fail("worker CALLBACK_BASE_URL %q must point at the ingress service (ingress:%s)", cb, listenPorts["ingress"])
		}
	}
	if got, want := envValue(simulator, "SIM_API_KEYS"), envValue(worker, "CAPTCHAAI_API_KEY"); got != want {
		fail("the simulator accepts %q but the worker sends another key; set SIM_API_KEYS from CAPTCHAAI_API_KEY", got)
	}
	for _, name := range []string{"worker", "ingress"} {
		if got := envValue(p.Services[name], "TEMPORAL_ADDRESS"); got != "" && got != "temporal:7233" {
			fail("%s TEMPORAL_ADDRESS is %q, want the temporal service (temporal:7233)", name, got)
		}
	}
	metricsPorts := map[string]string{}
	for name, key := range metricsAddrVar {
		if svc, ok := p.Services[name]; ok {
			port, portProblems := checkMetricsAddr(name, svc, key)
			problems = append(problems, portProblems...)
			metricsPorts[name] = port
		}
	}
	problems = append(problems, checkScrapeTargets(p, metricsPorts)...)
	return problems
}

// checkMetricsAddr: the service serves /metrics on all interfaces of its container (Prometheus runs in another)
// and publishes that port. Returns the port.
func checkMetricsAddr(name string, svc types.ServiceConfig, key string) (string, []string) {
	addr := envValue(svc, key)
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", []string{fmt.Sprintf("service %s %s=%q is not host:port: %v", name, key, addr, err)}
	}
	var problems []string
	if host != "0.0.0.0" && host != "" {
		problems = append(problems, fmt.Sprintf("service %s serves metrics on %s; Prometheus cannot reach it, use 0.0.0.0", name, addr))
	}
	published := false
	for _, p := range svc.Ports {
		published = published || strconv.FormatUint(uint64(p.Target), 10) == port
	}
	if !published {
		problems = append(problems, fmt.Sprintf("service %s serves metrics on port %s but does not publish it", name, port))
	}
	return port, problems
}

// checkImage: a pulled image names an exact version; a built one is never tagged latest.
func checkImage(who, image string, built bool) []string {
	if image == "" {
		return []string{who + " has no image name"}
	}
	ref := image
	if i := strings.Index(ref, "@"); i >= 0 {
		ref = ref[:i] // a digest pins it; the tag is still checked
	}
	tag := ""
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		tag = ref[i+1:]
	}
	switch {
	case tag == "latest":
		return []string{fmt.Sprintf("%s uses %s: never latest", who, image)}
	case built && tag == "":
		return []string{fmt.Sprintf("%s builds %s without a tag (that means latest)", who, image)}
	case !built && !strings.ContainsAny(tag, "0123456789"):
		return []string{fmt.Sprintf("%s uses %s: pin a version tag", who, image)}
	}
	return nil
}

// checkEnv: every variable set is one the binary reads, and every variable it requires is set.
func checkEnv(name string, svc types.ServiceConfig, b binaryenv.Env) []string {
	var problems []string
	for key := range svc.Environment {
		if !b.Reads(key) {
			problems = append(problems, fmt.Sprintf("service %s sets %s, which the %s binary does not read", name, key, name))
		}
	}
	for _, key := range b.Required {
		if envValue(svc, key) == "" {
			problems = append(problems, fmt.Sprintf("service %s does not set %s, which the %s binary requires", name, key, name))
		}
	}
	return problems
}

// checkListen: the binary listens on all interfaces of its container, on the port that is published and that
// its health check probes. Returns the port.
func checkListen(name string, svc types.ServiceConfig) (string, []string) {
	key := listenAddrVar[name]
	addr := envValue(svc, key)
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", []string{fmt.Sprintf("service %s %s=%q is not host:port: %v", name, key, addr, err)}
	}
	var problems []string
	if host != "0.0.0.0" && host != "" {
		problems = append(problems, fmt.Sprintf("service %s listens on %s; other containers cannot reach it, use 0.0.0.0", name, addr))
	}
	published := false
	for _, p := range svc.Ports {
		published = published || strconv.FormatUint(uint64(p.Target), 10) == port
	}
	if !published {
		problems = append(problems, fmt.Sprintf("service %s listens on port %s but does not publish it", name, port))
	}
	if svc.HealthCheck == nil || !strings.Contains(strings.Join(svc.HealthCheck.Test, " "), ":"+port+"/") {
		problems = append(problems, fmt.Sprintf("service %s health check does not probe its port %s", name, port))
	}
	return port, problems
}

// checkScrapeTargets: Prometheus scrapes the services on the ports they serve /metrics on.
func checkScrapeTargets(p *types.Project, metricsPorts map[string]string) []string {
	raw, err := os.ReadFile(prometheusConfig)
	if err != nil {
		return []string{err.Error()}
	}
	var cfg struct {
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		return []string{fmt.Sprintf("%s: %v", prometheusConfig, err)}
	}
	_, temporalMetricsPort, _ := net.SplitHostPort(envValue(p.Services["temporal"], "PROMETHEUS_ENDPOINT"))
	want := map[string]string{
		"captchaflow-worker":  "worker:" + metricsPorts["worker"],
		"captchaflow-ingress": "ingress:" + metricsPorts["ingress"],
		"temporal-server":     "temporal:" + temporalMetricsPort,
	}
	var problems []string
	for job, target := range want {
		found := false
		for _, sc := range cfg.ScrapeConfigs {
			for _, st := range sc.StaticConfigs {
				found = found || (sc.JobName == job && slices.Contains(st.Targets, target))
			}
		}
		if !found {
			problems = append(problems, fmt.Sprintf("%s: job %s must scrape %s", prometheusConfig, job, target))
		}
	}
	return problems
}

func envValue(svc types.ServiceConfig, key string) string {
	if v, ok := svc.Environment[key]; ok && v != nil {
		return *v
	}
	return ""
}

func TestComposeFileMatchesTheBinaries(t *testing.T) {
	p, err := loadCompose(composeFile, testEnv())
	require.NoError(t, err)
	assert.Empty(t, checkCompose(t, p))
}

// A plain `docker compose up` (no profile) must load too: the worker's wait for the simulator is optional.
func TestComposeFileLoadsWithoutProfiles(t *testing.T) {
	p, err := loadComposeProfiles(composeFile, testEnv(), nil)
	require.NoError(t, err)
	assert.Contains(t, p.Services, "worker")
	assert.Contains(t, p.DisabledServices, "simulator")
	assert.Contains(t, p.DisabledServices, "prometheus")
}

func TestComposeFileDemandsEverySecret(t *testing.T) {
	for _, secret := range composeSecrets {
		t.Run(secret, func(t *testing.T) {
			env := testEnv()
			delete(env, secret)
			_, err := loadCompose(composeFile, env)
			require.Error(t, err, "the compose file must refuse to load without %s", secret)
			assert.Contains(t, err.Error(), secret)
		})
	}
}

// TestComposeChecksCatchBrokenFiles proves the checks above can fail: each mutation of the real file must be
// reported.
func TestComposeChecksCatchBrokenFiles(t *testing.T) {
	original, err := os.ReadFile(composeFile)
	require.NoError(t, err)
	mutations := []struct{ name, from, to string }{
		{"latest tag", "image: postgres:16.10", "image: postgres:latest"},
		{"untagged image", "image: temporalio/ui:2.54.1", "image: temporalio/ui"},
		{"built image tagged latest", "image: captchaflow:local", "image: captchaflow:latest"},
		{"metrics port not published", "WORKER_METRICS_ADDR: 0.0.0.0:9091", "WORKER_METRICS_ADDR: 0.0.0.0:9092"},
		{"ingress on loopback", "INGRESS_ADDR: 0.0.0.0:8080", "INGRESS_ADDR: 127.0.0.1:8080"},
		{"ingress metrics on loopback", "INGRESS_METRICS_ADDR: 0.0.0.0:9092", "INGRESS_METRICS_ADDR: 127.0.0.1:9092"},
		{"ingress metrics port not published", `"127.0.0.1:9092:9092"`, `"127.0.0.1:9093:9093"`},
		{"ingress metrics on another port than scraped", "INGRESS_METRICS_ADDR: 0.0.0.0:9092", "INGRESS_METRICS_ADDR: 0.0.0.0:8080"},
		{"ingress metrics unset (the default is loopback)", "      INGRESS_METRICS_ADDR: 0.0.0.0:9092\n", ""},
		{"misspelt variable", "NOTIFY_SECRET: ${NOTIFY_SECRET:?set NOTIFY_SECRET}", "NOTIFY_SECRETS: ${NOTIFY_SECRET:?set NOTIFY_SECRET}"},
		{"variable of another binary", "INGRESS_ADDR: 0.0.0.0:8080", "INGRESS_ADDR: 0.0.0.0:8080\n      CAPTCHAAI_TIMEOUT: 10s"},
		{"Temporal address unset", "  TEMPORAL_ADDRESS: temporal:7233\n  TEMPORAL_NAMESPACE", "  TEMPORAL_NAMESPACE"},
		{"callback URL not at the ingress", "http://ingress:8080}", "http://worker:8080}"},
		{"server does not wait for the schema", "condition: service_completed_successfully", "condition: service_started"},
		{"port published on every interface", `"127.0.0.1:7233:7233"`, `"7233:7233"`},
		{"simulator always on", "    profiles: [simulator]\n", ""},
		{"simulator key differs", "SIM_API_KEYS: ${CAPTCHAAI_API_KEY:?set CAPTCHAAI_API_KEY}", "SIM_API_KEYS: other0key0000000000000000000000000"},
		{"mounted scripts missing", "./deploy/temporal:/etc/captchaflow:ro", "./deploy/nowhere:/etc/captchaflow:ro"},
		{"script renamed", `"/etc/captchaflow/setup-schema.sh"`, `"/etc/captchaflow/setup_schema.sh"`},
		{"health check on the wrong port", "http://127.0.0.1:8080/readyz", "http://127.0.0.1:8081/readyz"},
		{"not YAML", "services:\n", "services: [\n"},
	}
	dir := t.TempDir()
	for i, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			require.Contains(t, string(original), m.from, "mutation no longer applies; update it")
			path := filepath.Join(dir, fmt.Sprintf("compose-%d.yml", i))
			require.NoError(t, os.WriteFile(path, []byte(strings.Replace(string(original), m.from, m.to, 1)), 0o600))
			p, err := loadCompose(path, testEnv())
			if err != nil {
				t.Logf("refused to load: %v", err) // catching it too
				return
			}
			problems := checkCompose(t, p)
			assert.NotEmpty(t, problems, "the checks missed: %s", m.name)
			t.Logf("caught: %s", strings.Join(problems, "; "))
		})
	}
}
