package tests

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/captchaflow/captchaflow/codec"
	"github.com/captchaflow/captchaflow/tests/devstack"
	"github.com/captchaflow/captchaflow/tests/devstack/downstream"
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
	// lostAnswerWaitSeconds covers the simulator's solve times (at most a few seconds here), so a task whose in.php
	// answer was lost waits that long for its callback, not the production default of minutes.
	lostAnswerWaitSeconds  = 15
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

// errServerMissing marks a missing temporal-server: a skip locally, a failure in CI.
var errServerMissing = errors.New("temporal-server missing")

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
	ingressMetricsPort, ingressBMetricsPort, codecPort    int
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
	c     client.Client // through the codec: the suite runs encrypted, as make run does
	runID string

	keysFile string                     // CAPTCHAFLOW_KEYS_FILE of every process the harness starts
	codec    *codec.Codec               // decodes what the harness reads from history
	failures converter.FailureConverter // reads failures' encrypted messages

	creds map[string]map[string]string // role → TEMPORAL_* settings, on a server that authorizes (credentials_test.go)
}

func (s *stack) external() bool { return s.temporal == nil }

// startStack brings the stack up in dependency order; on failure it stops what it started and names the log
// directory.
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
		if s.creds, err = loadCredentials(ctx); err != nil {
			return s, err
		}
		check, closeCheck, err := s.temporalReady()
		if err != nil {
			return s, err
		}
		err = devstack.WaitReady(ctx, "external Temporal at "+addr, componentReady, check, nil)
		closeCheck()
		if err != nil {
			return s, err
		}
	} else {
		server, err := devstack.TemporalServerPath()
		if err != nil {
			return s, err
		}
		if _, err := os.Stat(server); err != nil {
			return s, fmt.Errorf("%w at %s (build it with `make tools` / tools/build.sh, or set TEMPORAL_SERVER): %v", errServerMissing, server, err)
		}
		// A fresh SQLite file per test binary run; the restart scenario reuses it.
		s.temporal, err = devstack.StartTemporal(ctx, devstack.TemporalOptions{
			ServerPath: server,
			DBFile:     filepath.Join(s.runDir, "data", "temporal.db"),
			LogPath:    filepath.Join(s.runDir, "temporal.log"),
			Headless:   true,
		})
		if err != nil {
			return s, err
		}
		s.temporalAddr = s.temporal.Address()
	}

	if err = s.writeKeys(); err != nil {
		return s, err
	}
	if s.bins, err = devstack.BuildBinaries(ctx, filepath.Join(s.runDir, "bin")); err != nil {
		return s, err
	}
	for _, p := range []*int{&s.simPort, &s.ingressPort, &s.ingressBPort, &s.workerMetricsPort, &s.ingressMetricsPort, &s.ingressBMetricsPort, &s.codecPort} {
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
	s.c, err = s.dialAs(ctx, roleCaptchaflow, s.namespace)
	return s, err
}

// temporalReady checks the server as captchaflow's own client.
func (s *stack) temporalReady() (devstack.Check, func(), error) {
	opts, err := s.clientOptions(roleCaptchaflow, s.namespace)
	if err != nil {
		return nil, nil, err
	}
	return devstack.TemporalReadyWith(opts)
}

// writeKeys makes the suite's key: a fresh one each run, the committed test key when recording histories.
func (s *stack) writeKeys() error {
	key := []byte(codec.NewKeyLine("e2e-" + s.runID))
	if os.Getenv(envRecord) != "" {
		var err error
		if key, err = os.ReadFile(testKeysFile); err != nil {
			return err
		}
	}
	s.keysFile = filepath.Join(s.runDir, "keys")
	if err := os.WriteFile(s.keysFile, key, 0o600); err != nil {
		return err
	}
	var opts client.Options
	var err error
	s.codec, err = codec.Configure(&opts, s.keysFile, nil)
	s.failures = opts.FailureConverter
	return err
}

// failureMessage is f's message as its worker wrote it, decrypted.
func (s *stack) failureMessage(f *failurepb.Failure) string {
	if f == nil {
		return ""
	}
	return s.failures.FailureToError(f).Error()
}

func loopback(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// addProxy puts an embedded toxiproxy proxy, on a free loopback port, in front of upstream.
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

func (s *stack) simURL() string            { return "http://" + loopback(s.simPort) }
func (s *stack) ingressURL() string        { return "http://" + loopback(s.ingressPort) }
func (s *stack) callbackBaseURL() string   { return "http://" + s.frontAddr }
func (s *stack) workerMetricsURL() string  { return "http://" + loopback(s.workerMetricsPort) }
func (s *stack) codecURL() string          { return "http://" + loopback(s.codecPort) }
func (s *stack) ingressMetricsURL() string { return "http://" + loopback(s.ingressMetricsPort) } // not on ingressURL
func (s *stack) notifyURL() string         { return s.down.URL() + "/hooks/captcha" }

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
