// Command starter starts one SolveCaptcha task and, with --wait, prints its result as JSON; `starter report` tells
// the provider whether a solved task's token worked.
//
//	go run ./starter --id demo-1 --method userrecaptcha --param googlekey=6Le... --param pageurl=https://example.com --wait
//	go run ./starter report --id demo-1 --verdict bad
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.temporal.io/sdk/temporal"

	"github.com/captchaflow/captchaflow"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// params collects repeated --param k=v flags.
type params map[string]string

func (p params) String() string { return fmt.Sprint(map[string]string(p)) }
func (p params) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("want key=value, got %q", v)
	}
	p[k] = val
	return nil
}

// run is the starter command; it returns the exit code: 0 started (or, with --wait, solved), 1 failed, 2 bad usage.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "report" {
		return runReport(args[1:], stdout, stderr)
	}
	a, ok := parseStartFlags(args, stderr)
	if !ok {
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	c, code := dial(ctx, "starter", stderr)
	if c == nil {
		return code
	}
	defer c.Close()

	run, err := captchaflow.Start(ctx, c, a.id, a.in, captchaflow.StartOptions{TaskQueue: a.taskQueue})
	if err != nil {
		fmt.Fprintln(stderr, "starter:", err)
		return 1
	}
	if !a.wait {
		fmt.Fprintf(stdout, "started workflow %s (run %s)\n", run.GetID(), run.GetRunID())
		return 0
	}
	if a.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.timeout)
		defer cancel()
	}
	var res captchaflow.Result
	if err := run.Get(ctx, &res); err != nil {
		fmt.Fprintln(stderr, "starter:", describe(err))
		return 1
	}
	writeJSON(stdout, res)
	return 0
}

// startArgs is what the command line asks the starter to do.
type startArgs struct {
	id, taskQueue string
	in            captchaflow.Input
	wait          bool
	timeout       time.Duration
}

// parseStartFlags reads the start command's flags into the workflow input; ok is false on bad usage, already
// explained on stderr.
func parseStartFlags(args []string, stderr io.Writer) (a startArgs, ok bool) {
	fs := flag.NewFlagSet("starter", flag.ContinueOnError)
	fs.SetOutput(stderr)
	p := params{}
	id := fs.String("id", "", "task ID, used as the workflow ID (required)")
	method := fs.String("method", "", "provider method, e.g. userrecaptcha, hcaptcha, turnstile, base64 (required)")
	fs.Var(p, "param", "in.php parameter key=value (repeatable)")
	callbackTimeout := fs.Duration("callback-timeout", 0, "wait this long for the callback before polling (default 120s)")
	pollInterval := fs.Duration("poll-interval", 0, "res.php poll interval (default 5s)")
	deadline := fs.Duration("deadline", 0, "give up after this long (default 10m)")
	maxSubmits := fs.Int("max-submits", 0, "submissions allowed for unsolvable answers (default 2)")
	notifyURL := fs.String("notify-url", "", "POST the result here (Standard Webhooks signed)")
	taskQueue := fs.String("task-queue", envOr("TASK_QUEUE", captchaflow.DefaultTaskQueue), "task queue")
	wait := fs.Bool("wait", false, "wait for the result and print it as JSON")
	timeout := fs.Duration("timeout", 0, "with --wait, stop waiting after this long (0 = until the workflow ends)")
	if err := fs.Parse(args); err != nil {
		return a, false
	}
	if *id == "" || *method == "" {
		fmt.Fprintln(stderr, "starter: --id and --method are required")
		fs.Usage()
		return a, false
	}
	return startArgs{id: *id, taskQueue: *taskQueue, wait: *wait, timeout: *timeout, in: captchaflow.Input{
		Method:                 *method,
		Params:                 captchaflow.Params(p),
		CallbackTimeoutSeconds: wholeSeconds(*callbackTimeout),
		PollIntervalSeconds:    wholeSeconds(*pollInterval),
		DeadlineSeconds:        wholeSeconds(*deadline),
		MaxSubmits:             *maxSubmits,
		NotifyURL:              *notifyURL,
	}}, true
}

// dial connects to Temporal with the environment's client options (TEMPORAL_ADDRESS and friends). On failure it
// explains on stderr, prefixed with the command's name, and returns a nil client and the exit code: 2 for bad
// configuration, 1 for an unreachable server.
func dial(ctx context.Context, command string, stderr io.Writer) (client.Client, int) {
	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		fmt.Fprintln(stderr, command+": temporal client configuration:", err)
		return nil, 2
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		fmt.Fprintf(stderr, "%s: connecting to Temporal at %s: %v\n", command, opts.HostPort, err)
		return nil, 1
	}
	return c, 0
}

// writeJSON prints v indented, for people and scripts alike.
func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// describe puts the typed failure reason first, so scripts can grep it.
func describe(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return fmt.Sprintf("%s: %s", appErr.Type(), appErr.Message())
	}
	return err.Error()
}

func wholeSeconds(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return int((d + time.Second - 1) / time.Second)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
