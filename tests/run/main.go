// Command run is `make run`: it builds captchaflow, starts the local stack (the Temporal server on SQLite with the Web UI, two
// provider simulators named in the worker's PROVIDERS_FILE, worker, ingress) and a webhook receiver, runs a demo
// batch of CAPTCHA tasks with injected trouble and a first provider that runs out of money partway through, shows
// progress and a summary that ends in "lost 0", and keeps the stack up for browsing until Ctrl-C.
//
// With CAPTCHAAI_API_KEY set (and CAPTCHAAI_BASE_URL unset) the worker talks to the real CaptchaAI instead of the
// simulator, and no demo batch is started (it would spend money on fake CAPTCHAs).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"golang.org/x/sync/errgroup"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/codec"
	"github.com/captchaflow/captchaflow/internal/telemetry"
	"github.com/captchaflow/captchaflow/tests/devstack"
	"github.com/captchaflow/captchaflow/tests/devstack/downstream"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second Ctrl-C ends us at once; the children then die with us (see devstack.Process)
	}()
	os.Exit(run(ctx, os.Args[1:], os.Stdout))
}

// startConcurrency bounds workflow starts in flight.
const startConcurrency = 8

type settings struct {
	tasks         int
	failoverTasks int
	pricedTasks   int
	exit          bool
	dataDir       string
	timeout       time.Duration
	progressEvery time.Duration
	temporalPort  int
	uiPort        int
	ingressPort   int
	simulatorPort int
	metricsPort   int
	codecPort     int
}

func parseFlags(args []string, errOut io.Writer) (settings, error) {
	var s settings
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.IntVar(&s.tasks, "tasks", 50, "number of demo tasks (0: start the stack only)")
	fs.IntVar(&s.failoverTasks, "failover-tasks", 20, "plain tasks after them, during which provider a runs out of money (0: none)")
	fs.IntVar(&s.pricedTasks, "priced-tasks", 20, "plain tasks on a worker with routing: scored and prices, after the summary (0: none)")
	fs.BoolVar(&s.exit, "exit", false, "stop the stack after the summary instead of keeping it up")
	fs.StringVar(&s.dataDir, "data", "", "directory for Temporal's SQLite file and the logs (default: .data in the module root)")
	fs.DurationVar(&s.timeout, "timeout", 4*time.Minute, "how long to wait for the demo batch")
	fs.DurationVar(&s.progressEvery, "progress", 2*time.Second, "interval between progress lines")
	fs.IntVar(&s.temporalPort, "port", 7233, "Temporal frontend port (0: any free port)")
	fs.IntVar(&s.uiPort, "ui-port", 8233, "Temporal Web UI port (0: any free port)")
	fs.IntVar(&s.ingressPort, "ingress-port", 8080, "ingress port (0: any free port)")
	fs.IntVar(&s.simulatorPort, "simulator-port", 8099, "provider simulator port (0: any free port)")
	fs.IntVar(&s.metricsPort, "metrics-port", 9091, "worker metrics and health port (0: any free port)")
	fs.IntVar(&s.codecPort, "codec-port", 8234, "the worker's codec server for the Web UI and the CLI (0: any free port)")
	if err := fs.Parse(args); err != nil {
		return s, err
	}
	if fs.NArg() > 0 {
		return s, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if s.tasks < 0 || s.failoverTasks < 0 || s.pricedTasks < 0 || s.timeout <= 0 || s.progressEvery <= 0 {
		return s, errors.New("-tasks, -failover-tasks and -priced-tasks must be >= 0, -timeout and -progress positive")
	}
	return s, nil
}

// printWhereToLook tells where the stack's tasks are seen: the Web UI, the caller team's namespace, the CLI.
func printWhereToLook(stack *devstack.Stack, s settings, root, cli string, out io.Writer) {
	fmt.Fprintf(out, "\nWeb UI:   %s/namespaces/%s/workflows\n", stack.Temporal.UIURL(), devstack.DefaultNamespace)
	fmt.Fprintf(out, "Nexus:    %s/namespaces/%s/workflows (the caller team's workflows, through the %s endpoint)\n",
		stack.Temporal.UIURL(), devstack.CallerNamespace, captchaflow.NexusEndpoint)
	fmt.Fprintf(out, "Try:      %s workflow list --address %s --query 'WorkflowType=\"SolveCaptcha\"' --limit 5\n", cli, stack.Temporal.Address())
	if url := stack.CodecURL(); url != "" {
		fmt.Fprintf(out, "Payloads are encrypted (key in %s); decoded: %s workflow show --address %s --codec-endpoint %s --workflow-id <ID>\n",
			keysFile(s.dataDir), cli, stack.Temporal.Address(), url)
	}
	if _, err := os.Stat(filepath.Join(root, cli)); err != nil && !filepath.IsAbs(cli) {
		fmt.Fprintln(out, "          (the Temporal CLI is built on demand, once: make cli)")
	}
}

// run returns the process exit code: 0 only if the stack came up and, with a demo, nothing was lost.
func run(ctx context.Context, args []string, out io.Writer) int {
	s, err := parseFlags(args, out)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(out, "run:", err)
		return 2
	}
	root, logDir, err := prepareDirs(&s)
	if err != nil {
		fmt.Fprintln(out, "run:", err)
		return 1
	}

	fmt.Fprintln(out, "starting the captchaflow stack (logs in "+logDir+")")
	stack, err := startStack(ctx, s, logDir, out)
	if err != nil {
		fmt.Fprintln(out, "run: the stack did not start:", err)
		return 1
	}
	defer stopStack(stack, out)

	cli := cliForDisplay(root)
	code := 0
	switch {
	case !stack.UsesSimulator():
		fmt.Fprintln(out, "\nthe worker uses the real provider (CAPTCHAAI_API_KEY is set): no demo batch is started.")
		fmt.Fprintln(out, "Callbacks to 127.0.0.1 cannot reach this machine from the provider, so tasks complete by polling res.php.")
	case s.tasks+s.failoverTasks > 0:
		code = runDemo(ctx, stack, s, cli, out)
	}

	printWhereToLook(stack, s, root, cli, out)
	if s.exit || ctx.Err() != nil {
		return code
	}
	fmt.Fprintln(out, "\nThe stack stays up for browsing. Press Ctrl-C to stop it.")
	<-ctx.Done()
	return code
}

// prepareDirs fails early when a fixed port is taken, defaults the data directory to the module root's .data and
// empties the log directory: each run starts with fresh logs, while Temporal's state in the data directory is kept.
func prepareDirs(s *settings) (root, logDir string, err error) {
	if err := checkPortsFree(*s); err != nil {
		return "", "", err
	}
	root, err = devstack.ModuleRoot()
	if err != nil {
		return "", "", err
	}
	if s.dataDir == "" {
		s.dataDir = filepath.Join(root, ".data")
	}
	logDir = filepath.Join(s.dataDir, "logs")
	if err := os.RemoveAll(logDir); err != nil {
		return "", "", err
	}
	return root, logDir, ensureKeys(s.dataDir)
}

// keysFile is make run's CAPTCHAFLOW_KEYS_FILE, kept with Temporal's state: its tasks must decrypt next time too.
func keysFile(dataDir string) string { return filepath.Join(dataDir, "keys") }

// ensureKeys makes the first key on the first start (encryption is on by default); an existing file is kept.
func ensureKeys(dataDir string) error {
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(keysFile(dataDir), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return nil
	} else if err != nil {
		return err
	}
	_, err = f.WriteString("# make run's payload keys (docs/security.md): the first encrypts, all decrypt\n" +
		codec.NewKeyLine("local-"+time.Now().UTC().Format("20060102")))
	return errors.Join(err, f.Close())
}

// startStack starts the local stack on the chosen ports with the demo's simulator settings, passing the provider
// and secrets through from the environment.
func startStack(ctx context.Context, s settings, logDir string, out io.Writer) (*devstack.Stack, error) {
	started := time.Now()
	stack, err := devstack.Start(ctx, devstack.Options{
		RunDir:            logDir,
		DataDir:           s.dataDir,
		TemporalPort:      s.temporalPort,
		TemporalUIPort:    s.uiPort,
		IngressPort:       s.ingressPort,
		SimulatorPort:     s.simulatorPort,
		WorkerMetricsPort: s.metricsPort,
		CodecPort:         s.codecPort,
		KeysFile:          keysFile(s.dataDir),
		ProviderAPIKey:    os.Getenv("CAPTCHAAI_API_KEY"),
		ProviderBaseURL:   os.Getenv("CAPTCHAAI_BASE_URL"),
		CallbackSecret:    os.Getenv("CALLBACK_SECRET"),
		NotifySecret:      os.Getenv("NOTIFY_SECRET"),
		SimulatorEnv:      demoSimulatorEnv,
		WorkerEnv:         otelEnv(),
		IngressEnv:        otelEnv(),
		Providers:         demoProvidersFor(os.Getenv("CAPTCHAAI_API_KEY"), os.Getenv("CAPTCHAAI_BASE_URL")),
		Logf:              func(format string, a ...any) { fmt.Fprintf(out, "  "+format+"\n", a...) },
	})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "stack ready in %s\n", time.Since(started).Round(100*time.Millisecond))
	return stack, nil
}

// otelEnv is the OTEL_* part of our environment, which the worker and the ingress get too.
func otelEnv() map[string]string {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") {
			env[k] = v
		}
	}
	return env
}

// stopStack stops every process of the stack and says so, so the user knows nothing is left running.
func stopStack(stack *devstack.Stack, out io.Writer) {
	fmt.Fprintln(out, "stopping the stack…")
	if err := stack.Stop(); err != nil {
		fmt.Fprintln(out, "run: stopping:", err)
	}
	fmt.Fprintln(out, "stopped; nothing is left running")
}

// runDemo starts the batch, reports progress until it is done (or the timeout, or Ctrl-C) and prints the summary.
func runDemo(ctx context.Context, stack *devstack.Stack, s settings, cli string, out io.Writer) int {
	receiver, err := downstream.Start("127.0.0.1:0", stack.NotifySecret())
	if err != nil {
		fmt.Fprintln(out, "run:", err)
		return 1
	}
	defer receiver.Close()

	c, launch, closeClients, err := connect(ctx, stack)
	if err != nil {
		fmt.Fprintln(out, "run:", err)
		return 1
	}
	defer closeClients()

	runID := time.Now().Format("20060102-150405")
	notify := receiver.URL() + "/hooks/captcha"
	tasks := planBatch(s.tasks, runID, notify)
	var failover []demoTask
	if len(stack.Providers()) > 1 {
		failover = planFailover(s.failoverTasks, len(tasks), runID, notify)
	}
	introduce(out, runID, tasks, failover, receiver.URL())
	track, elapsed := runBatch(ctx, launch, waves(stack, tasks, failover, runID), s, out)
	if len(failover) > 0 {
		if err := setBalance(ctx, stack.ProviderSimulatorURL(demoProviders[0].Name), demoBalance); err != nil {
			fmt.Fprintln(out, "run: giving provider a its balance back:", err)
		}
	}
	sum := summarize(ctx, c, stack, runID, receiver, track, elapsed)
	writeSummary(out, sum)
	pricedOK := true
	if len(stack.Providers()) > 1 && s.pricedTasks > 0 {
		split, err := runPriced(ctx, c, stack, s.pricedTasks, runID)
		if err != nil {
			fmt.Fprintln(out, "run: the priced batch:", err)
		}
		split.write(out)
		pricedOK = err == nil && split.Failed == 0
	}
	if id := exampleTask(tasks); id != "" {
		fmt.Fprintf(out, "\nSee one task's history (a pingback that never came, so it was polled):\n  %s workflow show --address %s --workflow-id %s\n",
			cli, stack.Temporal.Address(), id)
		printTrace(ctx, c, id, out)
	}
	if !sum.ok() || !pricedOK {
		return 1
	}
	return 0
}

// dialTraced connects to the stack's Temporal; with OTEL_* set (passed on to the worker and the ingress), each task
// starts a trace the summary names.
func dialTraced(ctx context.Context, stack *devstack.Stack) (client.Client, func(), error) {
	interceptors, flush, err := telemetry.Setup(ctx, "captchaflow-run")
	if err != nil {
		return nil, nil, fmt.Errorf("OTEL_* (tracing): %w", err)
	}
	opts := client.Options{HostPort: stack.Temporal.Address(), Namespace: devstack.DefaultNamespace,
		Logger: devstack.QuietSDKLogger(), Interceptors: interceptors}
	if _, err := codec.Configure(&opts, stack.ClientEnv()[codec.KeysFileEnv], nil); err != nil {
		return nil, nil, err
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to Temporal: %w", err)
	}
	return c, func() { c.Close(); _ = flush(context.WithoutCancel(ctx)) }, nil
}

// printTrace names the task's trace, read from its start event, or says how to get one.
func printTrace(ctx context.Context, c client.Client, id string, out io.Writer) {
	if iter := c.GetWorkflowHistory(ctx, id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT); iter.HasNext() {
		ev, _ := iter.Next()
		if sc := telemetry.StarterSpan(ev.GetWorkflowExecutionStartedEventAttributes().GetHeader()); sc.IsValid() {
			fmt.Fprintf(out, "and its trace (the submit, the poll, the delivery): trace ID %s\n", sc.TraceID())
			return
		}
	}
	fmt.Fprintln(out, "(with OTEL_EXPORTER_OTLP_ENDPOINT set to a collector, make run traces each task and names this one's trace ID)")
}

// introduce says what the batch holds and which trouble it meets.
func introduce(out io.Writer, runID string, tasks, failover []demoTask, receiverURL string) {
	fmt.Fprintf(out, "\nstarting %d demo tasks (workflow IDs demo-%s-NNN) with dropped, duplicate, late and hanging pingbacks,\n"+
		"unsolvable first attempts (some with an error-code pingback), and an in.php that is busy or refuses a task as\n"+
		"unsolvable; every %dth is a caller team's, solved from namespace %s through the Nexus endpoint %s", len(tasks), runID,
		nexusEvery, devstack.CallerNamespace, captchaflow.NexusEndpoint)
	if len(failover) > 0 {
		fmt.Fprintf(out, ";\nthen %d plain tasks: provider a (in.php) runs out of money once the first %d are accepted, and the rest\n"+
			"must go to provider b (createTask, CapSolver's flavor) at once", len(failover), failoverSplit(len(failover)))
	}
	fmt.Fprintf(out, ". The customer's webhook receiver is %s\n\n", receiverURL)
}

// wave is a part of the batch started together, once before (if set) has returned.
type wave struct {
	tasks  []demoTask
	before func(ctx context.Context, t *tracker) error
}

// runBatch starts the waves in turn and watches every task until all have finished, the timeout passes or
// Ctrl-C; it returns the tracker and how long the batch took.
func runBatch(ctx context.Context, launch startFunc, waves []wave, s settings, out io.Writer) (*tracker, time.Duration) {
	watchCtx, stopWatching := context.WithTimeout(ctx, s.timeout)
	defer stopWatching()
	start := time.Now()
	var all []demoTask
	for _, w := range waves {
		all = append(all, w.tasks...)
	}
	track := newTracker(all)
	track.wg.Add(1) // the waves' starter: Wait below covers the watches it adds
	go func() {
		defer track.wg.Done()
		for _, w := range waves {
			if w.before != nil {
				if err := w.before(watchCtx, track); err != nil {
					track.startFailed(w.tasks, err)
					continue
				}
			}
			startWave(watchCtx, launch, track, w.tasks)
		}
	}()
	showProgress(watchCtx, track, start, s.progressEvery, out)
	stopWatching()
	track.wg.Wait()
	return track, time.Since(start)
}

// startWave starts tasks in parallel, as a busy caller would; each start is one round trip to Temporal's SQLite.
// startFunc starts one demo task: directly, or through a caller workflow in shop (demoTask.ViaNexus).
type startFunc func(context.Context, demoTask) (client.WorkflowRun, error)

func startWave(ctx context.Context, launch startFunc, track *tracker, tasks []demoTask) {
	starts := errgroup.Group{}
	starts.SetLimit(startConcurrency)
	for _, task := range tasks {
		starts.Go(func() error {
			run, err := launch(ctx, task)
			if err != nil {
				track.startFailed([]demoTask{task}, err)
				return nil
			}
			track.watch(ctx, task, run)
			return nil
		})
	}
	_ = starts.Wait() // every start records its own error
}

// summarize sends the demo's verdicts and audits the batch against the simulator's own record of its tasks, so the
// summary's "lost" comes from the provider's side, not from what the workflows claim.
func summarize(ctx context.Context, c client.Client, stack *devstack.Stack, runID string, receiver *downstream.Receiver,
	track *tracker, elapsed time.Duration) summary {
	total, byScenario := track.snapshot()
	// A caller learns whether each token worked on the target site and says so; the provider refunds bad ones.
	reports := sendReports(ctx, c, reportPlan(track.results()))
	sum := summary{
		Elapsed: elapsed, Total: total, ByScenario: byScenario,
		Failures: track.failures(), Receiver: receiver.Stats(), Nexus: auditNexus(ctx, c, track),
	}
	if ctx.Err() != nil {
		sum.AuditError = "interrupted"
	} else if perProvider, err := fetchAllProviderTasks(ctx, stack, "demo-"+runID+"-"); err != nil {
		sum.AuditError = err.Error()
	} else {
		providerTasks := slices.Concat(slices.Collect(maps.Values(perProvider))...)
		a := auditDeliveries(providerTasks, receiver)
		a.Resubmits = auditResubmits(providerTasks, track.results(), demoCallbackTimeoutSeconds*time.Second)
		reports.countRecorded(providerTasks)
		a.Reports = reports
		if len(perProvider) > 1 {
			a.Routing = auditRouting(perProvider, track)
		}
		sum.Audit = &a
	}
	return sum
}

// showProgress prints a line every interval until every task has finished or ctx ends.
func showProgress(ctx context.Context, track *tracker, start time.Time, every time.Duration, out io.Writer) {
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		total, _ := track.snapshot()
		if total.Running == 0 {
			fmt.Fprintln(out, progressLine(int(time.Since(start).Seconds()), total))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			fmt.Fprintln(out, progressLine(int(time.Since(start).Seconds()), total))
		}
	}
}

// exampleTask picks a task worth opening in the UI: one whose pingback was dropped.
func exampleTask(tasks []demoTask) string {
	for _, t := range tasks {
		if t.Scenario.Fault == "drop_pingback" {
			return t.ID
		}
	}
	if len(tasks) > 0 {
		return tasks[0].ID
	}
	return ""
}

// checkPortsFree fails early, with a hint, when a fixed port is taken (typically by an earlier `make run`).
func checkPortsFree(s settings) error {
	for _, p := range []struct {
		port int
		what string
		flag string
	}{
		{s.temporalPort, "Temporal", "-port"},
		{s.uiPort, "the Temporal Web UI", "-ui-port"},
		{s.ingressPort, "the ingress", "-ingress-port"},
		{s.simulatorPort, "the provider simulator", "-simulator-port"},
		{s.metricsPort, "the worker's metrics", "-metrics-port"},
		{s.codecPort, "the codec server", "-codec-port"},
	} {
		if p.port == 0 {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port)))
		if err != nil {
			return fmt.Errorf("port %d for %s is in use (another `make run` or Temporal server?); stop it or pass %s PORT (ARGS=\"%s PORT\" with make)",
				p.port, p.what, p.flag, p.flag)
		}
		l.Close()
	}
	return nil
}

// cliForDisplay is the Temporal CLI's path relative to the module root when it lives there, as a user would
// type it.
func cliForDisplay(root string) string {
	cli, err := devstack.TemporalCLIPath()
	if err != nil {
		return "temporal"
	}
	if rel, err := filepath.Rel(root, cli); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return cli
}
