// Command starter starts one SolveCaptcha task and prints its workflow and run IDs, or with --wait its result, as
// JSON; `starter report` tells the provider whether a solved task's token worked.
//
//	go run ./starter --id demo-1 --method userrecaptcha --param googlekey=6Le... --param pageurl=https://example.com --wait
//	go run ./starter --via nexus --namespace shop --id demo-2 --method turnstile --param sitekey=0x4A... --param pageurl=https://example.com
//	go run ./starter report --id demo-1 --verdict bad
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/internal/config"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

var taskQueue = cmp.Or(os.Getenv("TASK_QUEUE"), captchaflow.DefaultTaskQueue) // the worker's

// run returns the exit code: 0 done, 1 failed, 2 bad usage or configuration.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "report" {
		return runReport(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("starter", flag.ContinueOnError)
	fs.SetOutput(stderr)
	p := captchaflow.Params{}
	id := fs.String("id", "", "task ID, used as the workflow ID (required)")
	method := fs.String("method", "", "provider method, e.g. userrecaptcha, hcaptcha, turnstile, base64 (required)")
	fs.Func("param", "in.php parameter key=value (repeatable)", func(v string) error {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return fmt.Errorf("want key=value, got %q", v)
		}
		p[k] = val
		return nil
	})
	fields := fs.String("input", "{}", `more input fields as JSON, e.g. {"deadline_seconds":300} (docs/contract.md)`)
	queue := fs.String("task-queue", taskQueue, "task queue")
	wait := fs.Bool("wait", false, "wait for the result and print it as JSON")
	timeout := fs.Duration("timeout", 0, "with --wait, stop waiting after this long (0 = until the workflow ends)")
	via := fs.String("via", "client", "client (of captchaflow's namespace) or nexus (a caller workflow in --namespace calls --endpoint; waits)")
	ns := fs.String("namespace", "", "Temporal namespace (default TEMPORAL_NAMESPACE, else default); with --via nexus the caller's, e.g. shop")
	endpoint := fs.String("endpoint", captchaflow.NexusEndpoint, "with --via nexus, the Nexus endpoint to call")
	var in captchaflow.Input
	if !parse(fs, args, "id", "method") {
		return 2
	} else if *via != "client" && *via != "nexus" {
		fmt.Fprintf(stderr, "starter: --via must be client or nexus, got %q\n", *via)
		return 2
	} else if err := json.Unmarshal([]byte(*fields), &in); err != nil {
		fmt.Fprintln(stderr, "starter: --input:", err)
		return 2
	}
	in.Method, in.Params = *method, p // a bad field of --input is Start's FieldError
	return execute("starter", *ns, *timeout, stdout, stderr, func(ctx context.Context, c client.Client) (any, error) {
		if *via == "nexus" {
			return solveViaNexus(ctx, c, *endpoint, captchaflow.SolveRequest{TaskID: *id, Input: in})
		}
		run, err := captchaflow.Start(ctx, c, *id, in, captchaflow.StartOptions{TaskQueue: *queue})
		switch {
		case err != nil:
			return nil, err
		case !*wait:
			return map[string]string{"workflow_id": run.GetID(), "run_id": run.GetRunID()}, nil
		}
		var res captchaflow.Result
		return res, run.Get(ctx, &res)
	})
}

// callerQueue is where starter hosts the caller's workflow while it waits: a rerun picks up one left behind.
const callerQueue = "captchaflow-starter-callers"

// solveViaNexus is a caller team's side: SolveViaNexus in the client's namespace, on a worker of starter's own.
func solveViaNexus(ctx context.Context, c client.Client, endpoint string, req captchaflow.SolveRequest) (captchaflow.Result, error) {
	w := worker.New(c, callerQueue, worker.Options{})
	w.RegisterWorkflowWithOptions(captchaflow.SolveViaNexus, workflow.RegisterOptions{Name: captchaflow.NexusCallerWorkflowType})
	if err := w.Start(); err != nil {
		return captchaflow.Result{}, err
	}
	defer w.Stop()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "via-nexus-" + req.TaskID, TaskQueue: callerQueue,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING}, // a rerun joins its caller
		captchaflow.NexusCallerWorkflowType, captchaflow.NexusCall{Endpoint: endpoint, SolveRequest: req})
	var res captchaflow.Result
	if err == nil {
		err = run.Get(ctx, &res)
	}
	return res, err
}

// runReport is `starter report --id ID --verdict good|bad` (captchaflow.SendReport); the failure type comes first.
func runReport(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("starter report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	id := fs.String("id", "", "task ID of the solved task (required)")
	verdict := fs.String("verdict", "", "good (the target site accepted the token) or bad (it refused it) (required)")
	queue := fs.String("task-queue", taskQueue, "task queue")
	timeout := fs.Duration("timeout", 0, "stop waiting after this long (0 = until the report is done)")
	if !parse(fs, args, "id", "verdict") {
		return 2
	}
	v := captchaflow.Verdict(*verdict)
	if err := v.Validate(); err != nil {
		fmt.Fprintln(stderr, "starter report:", err)
		return 2
	}
	if _, err := captchaflow.ReportWorkflowID(*id); err != nil {
		fmt.Fprintln(stderr, "starter report: --id:", err)
		return 2
	}
	return execute("starter report", "", *timeout, stdout, stderr, func(ctx context.Context, c client.Client) (any, error) {
		return captchaflow.SendReport(ctx, c, *id, v, captchaflow.StartOptions{TaskQueue: *queue})
	})
}

// parse reads the flags and checks the required ones, explaining bad usage on the flag set's output.
func parse(fs *flag.FlagSet, args []string, required ...string) bool {
	if fs.Parse(args) != nil {
		return false
	}
	for _, name := range required {
		if fs.Lookup(name).Value.String() == "" {
			fmt.Fprintf(fs.Output(), "%s: --%s are required\n", fs.Name(), strings.Join(required, " and --"))
			fs.Usage()
			return false
		}
	}
	return true
}

// execute dials Temporal and runs fn, printing its result as JSON.
func execute(name, namespace string, timeout time.Duration, stdout, stderr io.Writer, fn func(context.Context, client.Client) (any, error)) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	// The SDK logs to stdout, where the JSON goes: its warnings go to stderr, and the codec says nothing (stderr is ours).
	opts, _, flush, err := config.ClientOptions(ctx, "captchaflow-starter",
		slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), nil)
	if err != nil {
		fmt.Fprintln(stderr, name+":", err)
		return 2
	}
	defer func() { _ = flush(context.WithoutCancel(ctx)) }()
	opts.Namespace = cmp.Or(namespace, opts.Namespace)
	ctx, span := otel.Tracer("captchaflow").Start(ctx, name) // the task's trace starts here: its ID is printed
	defer span.End()
	if span.SpanContext().IsValid() {
		fmt.Fprintln(stderr, name+": trace_id", span.SpanContext().TraceID())
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		fmt.Fprintf(stderr, "%s: connecting to Temporal at %s: %v\n", name, opts.HostPort, err)
		return 1
	}
	defer c.Close()
	res, err := fn(ctx, c)
	var appErr *temporal.ApplicationError
	switch {
	case errors.As(err, &appErr): // the typed failure first, so scripts can grep it
		fmt.Fprintf(stderr, "%s: %s: %s\n", name, appErr.Type(), appErr.Message())
		return 1
	case err != nil:
		fmt.Fprintln(stderr, name+":", err)
		return 1
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(res)
	return 0
}
