package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"

	"github.com/captchaflow/captchaflow"
)

// runReport is `starter report --id ID --verdict good|bad`: it sends the verdict (captchaflow.SendReport) and prints
// the report's result as JSON. Exit 0: recorded (now, or already with the same verdict); 1: refused or failed, the
// failure type first on stderr (VerdictConflict, ReportWindowClosed, TaskNotSolved, …); 2: bad usage.
func runReport(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("starter report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	id := fs.String("id", "", "task ID of the solved task (required)")
	verdict := fs.String("verdict", "", "good (the target site accepted the token) or bad (it refused it) (required)")
	taskQueue := fs.String("task-queue", envOr("TASK_QUEUE", captchaflow.DefaultTaskQueue), "task queue")
	timeout := fs.Duration("timeout", 0, "stop waiting after this long (0 = until the report is done)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *id == "" || *verdict == "" {
		fmt.Fprintln(stderr, "starter report: --id and --verdict are required")
		fs.Usage()
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

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		fmt.Fprintln(stderr, "starter report: temporal client configuration:", err)
		return 2
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		fmt.Fprintf(stderr, "starter report: connecting to Temporal at %s: %v\n", opts.HostPort, err)
		return 1
	}
	defer c.Close()

	res, err := captchaflow.SendReport(ctx, c, *id, v, captchaflow.StartOptions{TaskQueue: *taskQueue})
	if err != nil {
		fmt.Fprintln(stderr, "starter report:", describe(err))
		return 1
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(res)
	return 0
}
