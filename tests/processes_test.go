package tests

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/tests/devstack"
)

func (s *stack) startSimulator(ctx context.Context) (err error) {
	s.sim, err = s.startProcess(ctx, "simulator", s.bins.Simulator, simEnv(s.simPort, 0), s.simURL()+"/healthz")
	return err
}

// simEnv is a simulator's environment on port; idOffset keeps the task IDs of several simulators apart.
func simEnv(port int, idOffset int64) map[string]string {
	return map[string]string{
		"SIM_ADDR":      loopback(port),
		"SIM_API_KEYS":  providerKey,
		"SIM_SOLVE_MIN": simSolveMin.String(),
		"SIM_SOLVE_MAX": simSolveMax.String(),
		"SIM_SEED":      strconv.Itoa(simSeed),
		// Provider task IDs unique across runs (10 digits, like CaptchaAI's), so that a search by CaptchaTaskId on
		// an external server that keeps earlier runs' workflows finds only this run's.
		"SIM_TASK_ID_BASE":     strconv.FormatInt(7_000_000_000+(time.Now().Unix()%200_000)*10_000+idOffset, 10),
		"SIM_LATE_DELAY":       simLateDelay.String(),
		"SIM_DUP_GAP":          "50ms",
		"SIM_HANG_FOR":         simHangFor.String(),
		"SIM_PINGBACK_TIMEOUT": simPingbackTimeout.String(),
		"SIM_CLOSE_TIMEOUT":    "2s",
	}
}

// workerEnvOn is the environment of a worker of another task queue. It leaves the namespace's balance schedule
// alone: every worker brings the schedule to its own task queue, and the stack's worker is the one that reads it.
func (s *stack) workerEnvOn(taskQueue string) map[string]string {
	env := s.workerEnv()
	env["TASK_QUEUE"] = taskQueue
	env["PROVIDER_BALANCE_INTERVAL"] = "0"
	return env
}

func (s *stack) workerEnv() map[string]string {
	return s.withCredentials(map[string]string{
		"CAPTCHAAI_API_KEY":      providerKey,
		"CAPTCHAAI_BASE_URL":     s.simURL(),
		"CAPTCHAAI_TIMEOUT":      "5s",
		"CALLBACK_BASE_URL":      s.callbackBaseURL(),
		"CALLBACK_SECRET":        callbackSecret,
		"NOTIFY_SECRET":          notifySecret,
		"NOTIFY_REQUEST_TIMEOUT": "2s",
		"NOTIFY_ALLOW_PRIVATE":   "true", // the webhook receiver is on loopback
		"SHUTDOWN_TIMEOUT":       "3s",
		"TASK_QUEUE":             captchaflow.DefaultTaskQueue,
		"WORKER_METRICS_ADDR":    loopback(s.workerMetricsPort),
		// The endpoint serves the caller team alone (TestE2E_NexusCallerNotListed).
		"NEXUS_CALLER_NAMESPACES": devstack.CallerNamespace,
		"TEMPORAL_ADDRESS":        s.temporalAddr,
		"TEMPORAL_NAMESPACE":      s.namespace,
		"CAPTCHAFLOW_KEYS_FILE":   s.keysFile,
	}, roleCaptchaflow)
}

func (s *stack) startWorker(ctx context.Context) error {
	env := s.workerEnv()
	env["CODEC_ADDR"], env["CODEC_LOOPBACK_WITHOUT_TOKEN"] = loopback(s.codecPort), "true" // make run's codec server
	p, err := s.startProcess(ctx, "worker", s.bins.Worker, env, s.workerMetricsURL()+"/healthz")
	s.mu.Lock()
	s.worker = p
	s.mu.Unlock()
	return err
}

// ingressEnv serves both the real ingress and the 503 one (startIngressB): they differ in ports, Temporal address
// and signal timeout.
func (s *stack) ingressEnv(port, metricsPort int, temporalAddr string, signalTimeout time.Duration) map[string]string {
	return s.withCredentials(map[string]string{
		"CAPTCHAFLOW_KEYS_FILE":  s.keysFile,
		"INGRESS_ADDR":           loopback(port),
		"INGRESS_METRICS_ADDR":   loopback(metricsPort),
		"CALLBACK_SECRET":        callbackSecret,
		"TEMPORAL_ADDRESS":       temporalAddr,
		"TEMPORAL_NAMESPACE":     s.namespace,
		"INGRESS_SIGNAL_TIMEOUT": signalTimeout.String(),
		// Longer than the simulator's pingback timeout, so a stalled callback is the provider's timeout to see.
		"INGRESS_READ_HEADER_TIMEOUT": "5s",
		"INGRESS_LOOKUP_TIMEOUT":      "3s",
		"SHUTDOWN_TIMEOUT":            "3s",
	}, roleCaptchaflow)
}

// startIngress starts the real ingress; it reaches Temporal through the temporal-leg proxy.
func (s *stack) startIngress(ctx context.Context) error {
	p, err := s.startProcess(ctx, "ingress", s.bins.Ingress,
		s.ingressEnv(s.ingressPort, s.ingressMetricsPort, s.tlegAddr, ingressSignalTimeout), s.ingressURL()+"/readyz")
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
		s.ingressEnv(s.ingressBPort, s.ingressBMetricsPort, loopback(closed), 500*time.Millisecond),
		"http://"+loopback(s.ingressBPort)+"/healthz")
	s.mu.Lock()
	s.ingressB = p
	s.mu.Unlock()
	return err
}

// startProcess returns the process even when it never got ready, so that stop can still end it.
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
	check, closeCheck, err := s.temporalReady()
	if err != nil {
		return err
	}
	defer closeCheck()
	return devstack.WaitReady(ctx, "external Temporal after restart", externalRestartReady, check, nil)
}
