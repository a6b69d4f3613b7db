package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/captchaflow/captchaflow"
)

// runReport is `starter report --id ID --verdict good|bad`: it sends the verdict (captchaflow.SendReport) and prints
// the report's result as JSON. Exit 0: recorded (now, or already with the same verdict); 1: refused or failed, the
// failure type first on stderr (VerdictConflict, ReportWindowClosed, TaskNotSolved, …); 2: bad usage.
func runReport(args []string, stdout, stderr io.Writer) int {
	a, ok := parseReportFlags(args, stderr)
	if !ok {
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if a.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.timeout)
		defer cancel()
	}
	c, code := dial(ctx, "starter report", stderr)
	if c == nil {
		return code
	}
	defer c.Close()

	res, err := captchaflow.SendReport(ctx, c, a.id, a.verdict, captchaflow.StartOptions{TaskQueue: a.taskQueue})
	if err != nil {
		fmt.Fprintln(stderr, "starter report:", describe(err))
		return 1
	}
	writeJSON(stdout, res)
	return 0
}

// reportArgs is what the command line asks `starter report` to send.
type reportArgs struct {
	id, taskQueue string
	verdict       captchaflow.Verdict
	timeout       time.Duration
}

// parseReportFlags reads and checks the report's flags before anything is dialled; ok is false on bad usage,
// already explained on stderr.
func parseReportFlags(args []string, stderr io.Writer) (a reportArgs, ok bool) {
	fs := flag.NewFlagSet("starter report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	id := fs.String("id", "", "task ID of the solved task (required)")
	verdict := fs.String("verdict", "", "good (the target site accepted the token) or bad (it refused it) (required)")
	taskQueue := fs.String("task-queue", envOr("TASK_QUEUE", captchaflow.DefaultTaskQueue), "task queue")
	timeout := fs.Duration("timeout", 0, "stop waiting after this long (0 = until the report is done)")
	if err := fs.Parse(args); err != nil {
		return a, false
	}
	if *id == "" || *verdict == "" {
		fmt.Fprintln(stderr, "starter report: --id and --verdict are required")
		fs.Usage()
		return a, false
	}
	v := captchaflow.Verdict(*verdict)
	if err := v.Validate(); err != nil {
		fmt.Fprintln(stderr, "starter report:", err)
		return a, false
	}
	if _, err := captchaflow.ReportWorkflowID(*id); err != nil {
		fmt.Fprintln(stderr, "starter report: --id:", err)
		return a, false
	}
	return reportArgs{id: *id, taskQueue: *taskQueue, verdict: v, timeout: *timeout}, true
}
