package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/captchaflow/captchaflow/tests/devstack"
)

// stack is the captchaflow stack under test: Temporal (a dev server we start, or an external one), and the
// simulator, worker and ingress processes.
type stack interface {
	TemporalAddress() string
	Namespace() string
	SimulatorURL() string
	WorkerMetricsURL() string
	// TemporalMetricsURL is the server's Prometheus endpoint ("" when the bench does not know it).
	TemporalMetricsURL() string
	// RestartWorker stops the worker gracefully and starts it again (a clean heap for the memory phase).
	RestartWorker(ctx context.Context) error
	Stop() error
	// Server describes the Temporal server for the report.
	Server() string
	// PIDs are the processes of the stack, by name (for CPU accounting).
	PIDs() map[string]int
	// StartExtraWorker starts another worker process, bin ("": the stack's worker binary), with the stack's worker
	// environment and overrides (its own TASK_QUEUE, PROVIDER_THREADS); the caller stops it.
	StartExtraWorker(ctx context.Context, name, bin string, overrides map[string]string) (*devstack.Process, error)
	// RestartIngress stops the ingress and starts it again with the stack's ingress environment and overrides on
	// top (nil: as it was started), e.g. the keys file of the encrypted scenarios.
	RestartIngress(ctx context.Context, overrides map[string]string) error
}

// stackConfig is what both kinds of stack need.
type stackConfig struct {
	RunDir          string
	DataDir         string // the dev server's SQLite file; empty: RunDir
	TemporalAddress string // empty: start a dev server
	Namespace       string
	TaskQueue       string
	DynamicConfig   map[string]string // dev server only
	SimulatorEnv    map[string]string
	WorkerEnv       map[string]string
	IngressEnv      map[string]string
	Logf            func(string, ...any)
}

func startStack(ctx context.Context, cfg stackConfig) (stack, error) {
	if cfg.TemporalAddress == "" {
		return startDevStack(ctx, cfg)
	}
	return startExternalStack(ctx, cfg)
}

// devStack is devstack.Stack: the dev server on a fresh SQLite file in the run directory.
type devStack struct{ s *devstack.Stack }

func startDevStack(ctx context.Context, cfg stackConfig) (stack, error) {
	s, err := devstack.Start(ctx, devstack.Options{
		RunDir:                cfg.RunDir,
		DataDir:               cfg.DataDir,
		TemporalHeadless:      true,
		TemporalDynamicConfig: cfg.DynamicConfig,
		SimulatorEnv:          cfg.SimulatorEnv,
		WorkerEnv:             cfg.WorkerEnv,
		IngressEnv:            cfg.IngressEnv,
		Logf:                  cfg.Logf,
	})
	if err != nil {
		return nil, err
	}
	return devStack{s}, nil
}

func (d devStack) TemporalAddress() string  { return d.s.Temporal.Address() }
func (d devStack) Namespace() string        { return devstack.DefaultNamespace }
func (d devStack) SimulatorURL() string     { return d.s.SimulatorURL() }
func (d devStack) WorkerMetricsURL() string { return d.s.WorkerMetricsURL() }
func (d devStack) Stop() error              { return d.s.Stop() }
func (d devStack) Server() string           { return "Temporal dev server (SQLite), " + d.s.Temporal.Address() }
func (d devStack) PIDs() map[string]int {
	return map[string]int{
		"temporal":  d.s.Temporal.Process().PID(),
		"worker":    d.s.Worker().PID(),
		"ingress":   d.s.Ingress().PID(),
		"simulator": d.s.Simulator().PID(),
	}
}

// TemporalMetricsURL is the dev server's /metrics.
func (d devStack) TemporalMetricsURL() string { return d.s.Temporal.MetricsURL() }

func (d devStack) StartExtraWorker(ctx context.Context, name, bin string, overrides map[string]string) (*devstack.Process, error) {
	return d.s.StartWorkerFrom(ctx, name, bin, overrides)
}

func (d devStack) RestartIngress(ctx context.Context, overrides map[string]string) error {
	return d.s.RestartIngressWith(ctx, overrides)
}

func (d devStack) RestartWorker(ctx context.Context) error {
	if err := d.s.Worker().Stop(); err != nil {
		return fmt.Errorf("stopping the worker: %w", err)
	}
	return d.s.StartWorker(ctx)
}

// externalStack runs the simulator, worker and ingress against a Temporal server someone else runs (the
// PostgreSQL-backed cluster). It sets the same environment devstack does.
type externalStack struct {
	cfg                                stackConfig
	simPort, metricsPort, ingressPort  int
	simulator, worker, ingress         *devstack.Process
	workerBin, ingressBin              string
	workerEnv, ingressEnv              map[string]string
	providerKey, callbackSecret, notif string
}

// startExternalStack builds the binaries and, once the external Temporal answers, starts simulator, worker and
// ingress against it; on failure whatever was started is stopped.
func startExternalStack(ctx context.Context, cfg stackConfig) (_ stack, err error) {
	bins, err := buildForTemporal(ctx, cfg)
	if err != nil {
		return nil, err
	}
	e, err := newExternalStack(cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, e.Stop())
		}
	}()
	if err = e.startProcesses(ctx, bins); err != nil {
		return nil, err
	}
	return e, nil
}

// buildForTemporal builds the binaries while nothing is running, then waits for the external Temporal's namespace
// to answer, so the processes never start against a server that is not there.
func buildForTemporal(ctx context.Context, cfg stackConfig) (devstack.Binaries, error) {
	root, err := devstack.ModuleRoot()
	if err != nil {
		return devstack.Binaries{}, err
	}
	started := time.Now()
	bins, err := devstack.BuildBinaries(ctx, filepath.Join(root, ".bin"))
	if err != nil {
		return devstack.Binaries{}, err
	}
	cfg.Logf("built binaries in %s", time.Since(started).Round(time.Millisecond))
	check, closeCheck, err := devstack.TemporalReady(cfg.TemporalAddress, cfg.Namespace)
	if err != nil {
		return devstack.Binaries{}, err
	}
	defer closeCheck()
	if err := devstack.WaitReady(ctx, "temporal at "+cfg.TemporalAddress, 30*time.Second, check, nil); err != nil {
		return devstack.Binaries{}, err
	}
	return bins, nil
}

// newExternalStack draws this stack's own secrets and free ports, so it shares neither with another stack.
func newExternalStack(cfg stackConfig) (*externalStack, error) {
	e := &externalStack{cfg: cfg, providerKey: randomHex(16), callbackSecret: randomHex(32)}
	nb := make([]byte, 32)
	_, _ = rand.Read(nb)
	e.notif = "whsec_" + base64.StdEncoding.EncodeToString(nb)
	for _, p := range []*int{&e.simPort, &e.metricsPort, &e.ingressPort} {
		var err error
		if *p, err = devstack.FreePort(); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// startProcesses starts simulator, worker and ingress in dependency order, each wired to the others and ready
// before the next starts.
func (e *externalStack) startProcesses(ctx context.Context, bins devstack.Binaries) (err error) {
	cfg := e.cfg
	simEnv := map[string]string{"SIM_ADDR": loopback(e.simPort), "SIM_API_KEYS": e.providerKey}
	if e.simulator, err = e.start(ctx, "simulator", bins.Simulator, simEnv, cfg.SimulatorEnv, e.SimulatorURL()+"/healthz"); err != nil {
		return err
	}
	workerEnv := map[string]string{
		"CAPTCHAAI_API_KEY":   e.providerKey,
		"CAPTCHAAI_BASE_URL":  e.SimulatorURL(),
		"CALLBACK_BASE_URL":   "http://" + loopback(e.ingressPort),
		"CALLBACK_SECRET":     e.callbackSecret,
		"NOTIFY_SECRET":       e.notif,
		"TASK_QUEUE":          cfg.TaskQueue,
		"WORKER_METRICS_ADDR": loopback(e.metricsPort),
		"TEMPORAL_ADDRESS":    cfg.TemporalAddress,
		"TEMPORAL_NAMESPACE":  cfg.Namespace,
	}
	e.workerBin, e.workerEnv = bins.Worker, workerEnv
	if e.worker, err = e.start(ctx, "worker", bins.Worker, workerEnv, cfg.WorkerEnv, e.WorkerMetricsURL()+"/healthz"); err != nil {
		return err
	}
	ingressEnv := map[string]string{
		"INGRESS_ADDR":         loopback(e.ingressPort),
		"INGRESS_METRICS_ADDR": "", // not scraped here; the default port would collide with another stack
		"CALLBACK_SECRET":      e.callbackSecret,
		"TEMPORAL_ADDRESS":     cfg.TemporalAddress,
		"TEMPORAL_NAMESPACE":   cfg.Namespace,
	}
	e.ingressBin, e.ingressEnv = bins.Ingress, ingressEnv
	return e.RestartIngress(ctx, nil)
}

// RestartIngress starts the ingress (stopping the running one first) with -ingress-env and overrides on top.
func (e *externalStack) RestartIngress(ctx context.Context, overrides map[string]string) error {
	if e.ingress != nil {
		if err := e.ingress.Stop(); err != nil {
			return fmt.Errorf("stopping the ingress: %w", err)
		}
	}
	own := maps.Clone(e.cfg.IngressEnv)
	if own == nil {
		own = map[string]string{}
	}
	maps.Copy(own, overrides)
	var err error
	e.ingress, err = e.start(ctx, "ingress", e.ingressBin, e.ingressEnv, own, "http://"+loopback(e.ingressPort)+"/readyz")
	return err
}

func (e *externalStack) start(ctx context.Context, name, bin string, env, overrides map[string]string, readyURL string) (*devstack.Process, error) {
	started := time.Now()
	p, err := devstack.StartProcess(devstack.ProcessSpec{
		Name:    name,
		Path:    bin,
		Env:     devstack.MergeEnv(env, overrides),
		LogPath: filepath.Join(e.cfg.RunDir, name+".log"),
	})
	if err != nil {
		return nil, err
	}
	if err := devstack.WaitReady(ctx, name, 30*time.Second, devstack.HTTPOK(readyURL), p); err != nil {
		p.Kill()
		return nil, err
	}
	e.cfg.Logf("%s ready in %s", name, time.Since(started).Round(time.Millisecond))
	return p, nil
}

func (e *externalStack) StartExtraWorker(ctx context.Context, name, bin string, overrides map[string]string) (*devstack.Process, error) {
	port, err := devstack.FreePort()
	if err != nil {
		return nil, err
	}
	own := maps.Clone(e.cfg.WorkerEnv)
	if own == nil {
		own = map[string]string{}
	}
	maps.Copy(own, overrides)
	own["WORKER_METRICS_ADDR"] = loopback(port)
	return e.start(ctx, name, cmp.Or(bin, e.workerBin), e.workerEnv, own, "http://"+loopback(port)+"/healthz")
}

func (e *externalStack) TemporalAddress() string  { return e.cfg.TemporalAddress }
func (e *externalStack) Namespace() string        { return e.cfg.Namespace }
func (e *externalStack) SimulatorURL() string     { return "http://" + loopback(e.simPort) }
func (e *externalStack) WorkerMetricsURL() string { return "http://" + loopback(e.metricsPort) }
func (e *externalStack) Server() string           { return "external Temporal at " + e.cfg.TemporalAddress }

// TemporalMetricsURL: the external server's metrics are not known to the bench.
func (e *externalStack) TemporalMetricsURL() string { return "" }

func (e *externalStack) PIDs() map[string]int {
	return map[string]int{"worker": e.worker.PID(), "ingress": e.ingress.PID(), "simulator": e.simulator.PID()}
}

func (e *externalStack) RestartWorker(ctx context.Context) error {
	if err := e.worker.Stop(); err != nil {
		return fmt.Errorf("stopping the worker: %w", err)
	}
	if err := e.worker.Restart(); err != nil {
		return err
	}
	return devstack.WaitReady(ctx, "worker", 30*time.Second, devstack.HTTPOK(e.WorkerMetricsURL()+"/healthz"), e.worker)
}

func (e *externalStack) Stop() error {
	var errs []error
	for _, p := range []*devstack.Process{e.ingress, e.worker, e.simulator} {
		if p != nil {
			errs = append(errs, p.Stop())
		}
	}
	return errors.Join(errs...)
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
