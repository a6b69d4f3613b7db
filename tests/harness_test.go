package tests

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
	"go.temporal.io/sdk/client"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/devstack"
	"github.com/captchaflow/captchaflow/devstack/downstream"
)

// Fixed, distinctive test secrets. The recorded histories in testdata/ are scanned for them
// (TestRecordedHistoriesHoldNoSecrets): none may ever reach workflow history.
const (
	providerKey    = "replay0provider0key0000000000000" // 32 characters, as the simulator (and CaptchaAI) want
	callbackSecret = "replay0callback0secret0000000000"
	notifySecret   = "replay0notify0secret000000000000"
)

// Short timings so that every fallback path runs in seconds.
const (
	callbackTimeoutSeconds = 2 // the workflow waits this long for the pingback before polling res.php
	pollIntervalSeconds    = 1
	deadlineSeconds        = 240 // leaves room for a 45 s activity timeout after a worker SIGKILL
	deliveryTimeoutSeconds = 600

	simSolveMin        = 100 * time.Millisecond
	simSolveMax        = 500 * time.Millisecond
	simLateDelay       = 6 * time.Second // well past the callback timeout: the poll wins and the task is done, then the pingback comes
	simPingbackTimeout = 3 * time.Second
	simHangFor         = 3 * time.Second
	simSeed            = 20240611

	ingressSignalTimeout = 5 * time.Second
	componentReady       = 30 * time.Second
	externalRestartReady = 3 * time.Minute
)

// Environment of the harness.
const (
	envExternalAddress   = "E2E_TEMPORAL_ADDRESS"     // run against this Temporal frontend instead of a dev server
	envExternalNamespace = "E2E_TEMPORAL_NAMESPACE"   // its namespace (default "default")
	envExternalRestart   = "E2E_TEMPORAL_RESTART_CMD" // shell command (run in the module root) that restarts it (scenario 4)
	envKeepLogs          = "E2E_KEEP_LOGS"            // keep the run directory even when every test passed
)

// errCLIMissing marks a missing Temporal CLI: a skip locally, a failure in CI.
var errCLIMissing = errors.New("temporal CLI missing")

// stack is the system under test, every component a real process on 127.0.0.1:
//
//	simulator --pingback--> [front proxy] --> ingress --> [temporal-leg proxy] --> Temporal <-- worker
//	worker --deliver--> downstream receiver (in this process)
//
// The two proxies are toxiproxy, embedded: front cuts, stalls or reroutes callbacks; the temporal leg slows or
// black-holes the ingress's signals.
type stack struct {
	runDir string
	bins   devstack.Binaries

	temporal     *devstack.Temporal // nil with an external server
	temporalAddr string
	namespace    string
	restartCmd   string

	simPort, ingressPort, ingressBPort, workerMetricsPort int
	frontAddr, tlegAddr                                   string

	mu       sync.Mutex
	sim      *devstack.Process
	worker   *devstack.Process
	ingress  *devstack.Process
	ingressB *devstack.Process // answers 503: its Temporal address is a closed port

	tox   *toxiproxy.ApiServer
	front *toxiproxy.Proxy
	tleg  *toxiproxy.Proxy
	down  *downstream.Receiver
	c     client.Client
	runID string
}

func (s *stack) external() bool { return s.temporal == nil }

func startStack(ctx context.Context) (s *stack, err error) {
	s = &stack{namespace: devstack.DefaultNamespace, runID: strconv.FormatInt(time.Now().UnixMilli()%(36*36*36*36*36), 36)}
	if s.runDir, err = os.MkdirTemp("", "captchaflow-e2e-*"); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.stop()
			err = fmt.Errorf("%w\n(logs in %s)", err, s.runDir)
		}
	}()

	if addr := os.Getenv(envExternalAddress); addr != "" {
		s.temporalAddr = addr
		if ns := os.Getenv(envExternalNamespace); ns != "" {
			s.namespace = ns
		}
		s.restartCmd = os.Getenv(envExternalRestart)
		check, closeCheck, err := devstack.TemporalReady(addr, s.namespace)
		if err != nil {
			return s, err
		}
		err = devstack.WaitReady(ctx, "external Temporal at "+addr, componentReady, check, nil)
		closeCheck()
		if err != nil {
			return s, err
		}
	} else {
		cli, err := devstack.TemporalCLIPath()
		if err != nil {
			return s, err
		}
		if _, err := os.Stat(cli); err != nil {
			return s, fmt.Errorf("%w at %s (build it with `make tools` / tools/build.sh, or set TEMPORAL_CLI): %v", errCLIMissing, cli, err)
		}
		// A fresh SQLite file per test binary run; the restart scenario reuses it.
		s.temporal, err = devstack.StartTemporal(ctx, devstack.TemporalOptions{
			CLIPath:  cli,
			DBFile:   filepath.Join(s.runDir, "data", "temporal.db"),
			LogPath:  filepath.Join(s.runDir, "temporal.log"),
			Headless: true,
		})
		if err != nil {
			return s, err
		}
		s.temporalAddr = s.temporal.Address()
	}

	if s.bins, err = devstack.BuildBinaries(ctx, filepath.Join(s.runDir, "bin")); err != nil {
		return s, err
	}
	for _, p := range []*int{&s.simPort, &s.ingressPort, &s.ingressBPort, &s.workerMetricsPort} {
		if *p, err = devstack.FreePort(); err != nil {
			return s, err
		}
	}

	logger := zerolog.Nop()
	s.tox = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), logger)
	if s.front, err = s.addProxy("callbacks", loopback(s.ingressPort)); err != nil {
		return s, err
	}
	s.frontAddr = s.front.Listen
	if s.tleg, err = s.addProxy("ingress-to-temporal", s.temporalAddr); err != nil {
		return s, err
	}
	s.tlegAddr = s.tleg.Listen

	if s.down, err = downstream.Start("127.0.0.1:0", notifySecret); err != nil {
		return s, err
	}
	if err = s.startSimulator(ctx); err != nil {
		return s, err
	}
	if err = s.startWorker(ctx); err != nil {
		return s, err
	}
	if err = s.startIngress(ctx); err != nil {
		return s, err
	}
	s.c, err = client.DialContext(ctx, client.Options{HostPort: s.temporalAddr, Namespace: s.namespace, Logger: devstack.QuietSDKLogger()})
	return s, err
}

func loopback(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

func (s *stack) addProxy(name, upstream string) (*toxiproxy.Proxy, error) {
	port, err := devstack.FreePort()
	if err != nil {
		return nil, err
	}
	p := toxiproxy.NewProxy(s.tox, name, loopback(port), upstream)
	if err := s.tox.Collection.Add(p, true); err != nil {
		return nil, fmt.Errorf("toxiproxy %s: %w", name, err)
	}
	return p, nil
}

func (s *stack) simURL() string           { return "http://" + loopback(s.simPort) }
func (s *stack) ingressURL() string       { return "http://" + loopback(s.ingressPort) }
func (s *stack) callbackBaseURL() string  { return "http://" + s.frontAddr }
func (s *stack) workerMetricsURL() string { return "http://" + loopback(s.workerMetricsPort) }
func (s *stack) notifyURL() string        { return s.down.URL() + "/hooks/captcha" }

func (s *stack) startSimulator(ctx context.Context) (err error) {
	s.sim, err = s.startProcess(ctx, "simulator", s.bins.Simulator, map[string]string{
		"SIM_ADDR":      loopback(s.simPort),
		"SIM_API_KEYS":  providerKey,
		"SIM_SOLVE_MIN": simSolveMin.String(),
		"SIM_SOLVE_MAX": simSolveMax.String(),
		"SIM_SEED":      strconv.Itoa(simSeed),
		// Provider task IDs unique across runs (10 digits, like CaptchaAI's), so that a search by CaptchaTaskId on
		// an external server that keeps earlier runs' workflows finds only this run's.
		"SIM_TASK_ID_BASE":     strconv.FormatInt(7_000_000_000+(time.Now().Unix()%200_000)*10_000, 10),
		"SIM_LATE_DELAY":       simLateDelay.String(),
		"SIM_DUP_GAP":          "50ms",
		"SIM_HANG_FOR":         simHangFor.String(),
		"SIM_PINGBACK_TIMEOUT": simPingbackTimeout.String(),
		"SIM_CLOSE_TIMEOUT":    "2s",
	}, s.simURL()+"/healthz")
	return err
}

func (s *stack) workerEnv() map[string]string {
	return map[string]string{
		"CAPTCHAAI_API_KEY":      providerKey,
		"CAPTCHAAI_BASE_URL":     s.simURL(),
		"CAPTCHAAI_TIMEOUT":      "5s",
		"CALLBACK_BASE_URL":      s.callbackBaseURL(),
		"CALLBACK_SECRET":        callbackSecret,
		"NOTIFY_SECRET":          notifySecret,
		"NOTIFY_REQUEST_TIMEOUT": "2s",
		"SHUTDOWN_TIMEOUT":       "3s",
		"TASK_QUEUE":             captchaflow.DefaultTaskQueue,
		"WORKER_METRICS_ADDR":    loopback(s.workerMetricsPort),
		"TEMPORAL_ADDRESS":       s.temporalAddr,
		"TEMPORAL_NAMESPACE":     s.namespace,
	}
}

func (s *stack) startWorker(ctx context.Context) error {
	p, err := s.startProcess(ctx, "worker", s.bins.Worker, s.workerEnv(), s.workerMetricsURL()+"/healthz")
	s.mu.Lock()
	s.worker = p
	s.mu.Unlock()
	return err
}

func ingressEnv(port int, temporalAddr, namespace string, signalTimeout time.Duration) map[string]string {
	return map[string]string{
		"INGRESS_ADDR":           loopback(port),
		"CALLBACK_SECRET":        callbackSecret,
		"TEMPORAL_ADDRESS":       temporalAddr,
		"TEMPORAL_NAMESPACE":     namespace,
		"INGRESS_SIGNAL_TIMEOUT": signalTimeout.String(),
		// Longer than the simulator's pingback timeout, so a stalled callback is the provider's timeout to see.
		"INGRESS_READ_HEADER_TIMEOUT": "5s",
		"INGRESS_LOOKUP_TIMEOUT":      "3s",
		"SHUTDOWN_TIMEOUT":            "3s",
	}
}

// startIngress starts the real ingress; it reaches Temporal through the temporal-leg proxy.
func (s *stack) startIngress(ctx context.Context) error {
	p, err := s.startProcess(ctx, "ingress", s.bins.Ingress,
		ingressEnv(s.ingressPort, s.tlegAddr, s.namespace, ingressSignalTimeout), s.ingressURL()+"/readyz")
	s.mu.Lock()
	s.ingress = p
	s.mu.Unlock()
	return err
}

// startIngressB starts (once) a second, real ingress whose Temporal address is a port nobody listens on: every
// callback it gets is answered 503, the honest "ingress answers 5xx" failure.
func (s *stack) startIngressB(ctx context.Context) error {
	s.mu.Lock()
	running := s.ingressB != nil && s.ingressB.Running()
	s.mu.Unlock()
	if running {
		return nil
	}
	closed, err := devstack.FreePort()
	if err != nil {
		return err
	}
	p, err := s.startProcess(ctx, "ingress-503", s.bins.Ingress,
		ingressEnv(s.ingressBPort, loopback(closed), s.namespace, 500*time.Millisecond),
		"http://"+loopback(s.ingressBPort)+"/healthz")
	s.mu.Lock()
	s.ingressB = p
	s.mu.Unlock()
	return err
}

func (s *stack) startProcess(ctx context.Context, name, bin string, env map[string]string, readyURL string) (*devstack.Process, error) {
	p, err := devstack.StartProcess(devstack.ProcessSpec{
		Name:        name,
		Path:        bin,
		Env:         devstack.MergeEnv(env),
		LogPath:     filepath.Join(s.runDir, name+".log"),
		StopTimeout: 5 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	if err := devstack.WaitReady(ctx, name, componentReady, devstack.HTTPOK(readyURL), p); err != nil {
		return p, err
	}
	return p, nil
}

// restart starts p again (after Kill or Stop) with the same spec and waits until readyURL answers 200.
func restart(ctx context.Context, p *devstack.Process, readyURL string) error {
	if err := p.Restart(); err != nil {
		return err
	}
	return devstack.WaitReady(ctx, p.Name(), componentReady, devstack.HTTPOK(readyURL), p)
}

func (s *stack) restartWorker(ctx context.Context) error {
	return restart(ctx, s.worker, s.workerMetricsURL()+"/healthz")
}

func (s *stack) restartIngress(ctx context.Context) error {
	return restart(ctx, s.ingress, s.ingressURL()+"/readyz")
}

// restartTemporal stops Temporal and starts it again on the same state (the dev server's SQLite file, or whatever
// E2E_TEMPORAL_RESTART_CMD restarts), then waits until it serves the namespace.
func (s *stack) restartTemporal(ctx context.Context) (err error) {
	if s.temporal != nil {
		return s.temporal.Restart(ctx)
	}
	if s.restartCmd == "" {
		return errors.New(envExternalRestart + " is not set")
	}
	cmdCtx, cancel := context.WithTimeout(ctx, externalRestartReady)
	defer cancel()
	cmd := exec.CommandContext(cmdCtx, "sh", "-c", s.restartCmd)
	// Relative paths in the command (cluster/up.sh) are relative to the module root, not to tests/.
	if cmd.Dir, err = devstack.ModuleRoot(); err != nil {
		return err
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s failed: %w\n%s", envExternalRestart, err, out)
	}
	check, closeCheck, err := devstack.TemporalReady(s.temporalAddr, s.namespace)
	if err != nil {
		return err
	}
	defer closeCheck()
	return devstack.WaitReady(ctx, "external Temporal after restart", externalRestartReady, check, nil)
}

// setFrontUpstream points the callback proxy at another ingress (existing connections are cut).
func (s *stack) setFrontUpstream(upstream string) error {
	return s.front.Update(&toxiproxy.Proxy{Listen: s.frontAddr, Upstream: upstream, Enabled: true})
}

// addToxic adds a toxic (toxiproxy's JSON form) to a proxy and returns a function that removes it.
func addToxic(p *toxiproxy.Proxy, toxicJSON string) (remove func(), err error) {
	w, err := p.Toxics.AddToxicJson(strings.NewReader(toxicJSON))
	if err != nil {
		return nil, fmt.Errorf("toxic %s on %s: %w", toxicJSON, p.Name, err)
	}
	return func() { _ = p.Toxics.RemoveToxic(context.Background(), w.Name) }, nil
}

// resetChaos restores every fault the harness controls, so one scenario's leftovers cannot leak into the next.
func (s *stack) resetChaos(ctx context.Context) error {
	var errs []error
	s.front.Toxics.ResetToxics(ctx)
	s.tleg.Toxics.ResetToxics(ctx)
	// Same upstream and enabled: a no-op; otherwise it reroutes to the ingress and (re)opens the listener.
	errs = append(errs, s.setFrontUpstream(loopback(s.ingressPort)))
	errs = append(errs, s.down.Up())
	s.down.FailWith(0)
	if !s.worker.Running() {
		errs = append(errs, s.restartWorker(ctx))
	}
	if !s.ingress.Running() {
		errs = append(errs, s.restartIngress(ctx))
	}
	if !s.sim.Running() {
		errs = append(errs, restart(ctx, s.sim, s.simURL()+"/healthz"))
	}
	return errors.Join(errs...)
}

// stop ends everything the harness started. The run directory (logs, SQLite) is removed unless keep is set.
func (s *stack) stop() {
	if s.c != nil {
		s.c.Close()
	}
	for _, p := range []*devstack.Process{s.ingressB, s.ingress, s.worker, s.sim} {
		if p != nil {
			_ = p.Stop()
		}
	}
	if s.temporal != nil {
		_ = s.temporal.Stop()
	}
	if s.tox != nil {
		_ = s.tox.Collection.Clear()
	}
	if s.down != nil {
		_ = s.down.Close()
	}
}

// logTails is the end of each component's log, for a failing test's output.
func (s *stack) logTails(lines int) string {
	var b strings.Builder
	for _, p := range []*devstack.Process{s.worker, s.ingress, s.sim} {
		if p != nil {
			fmt.Fprintf(&b, "--- last %d lines of %s ---\n%s\n", lines, p.LogPath(), p.Tail(lines))
		}
	}
	return b.String()
}

// httpGet performs one GET with a short timeout and returns the status and body.
func httpGet(ctx context.Context, url string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	return resp.StatusCode, string(body), err
}
