package devstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
)

// Check reports nil once a component is ready; it must return within its context's deadline.
type Check func(ctx context.Context) error

const (
	// checkAttemptTimeout bounds one readiness probe, so a hung endpoint cannot eat the whole wait.
	checkAttemptTimeout = 2 * time.Second
	pollInterval        = 100 * time.Millisecond
	maxPollInterval     = time.Second
	logLinesInErrors    = 20
)

// WaitReady polls check until it succeeds. It fails when timeout passes or ctx ends, or at once when proc (which
// may be nil) exits first; the error names what did not become ready, the last probe error and the last lines of
// proc's log.
func WaitReady(ctx context.Context, what string, timeout time.Duration, check Check, proc *Process) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var exited <-chan struct{}
	if proc != nil {
		exited = proc.Exited()
	}
	interval := pollInterval
	var lastErr error
	for {
		attemptCtx, cancelAttempt := context.WithTimeout(ctx, checkAttemptTimeout)
		lastErr = check(attemptCtx)
		cancelAttempt()
		if lastErr == nil {
			return nil
		}
		timer := time.NewTimer(interval)
		select {
		case <-exited:
			timer.Stop()
			return fmt.Errorf("%s exited before it became ready (%v)%s", what, proc.Wait(), logNote(proc))
		case <-ctx.Done():
			timer.Stop()
			reason := fmt.Sprintf("within %s", timeout)
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				reason = "before it was cancelled"
			}
			return fmt.Errorf("%s did not become ready %s; last check: %v%s", what, reason, lastErr, logNote(proc))
		case <-timer.C:
		}
		interval = min(interval*2, maxPollInterval)
	}
}

func logNote(proc *Process) string {
	if proc == nil {
		return ""
	}
	return fmt.Sprintf("\n--- last %d lines of %s ---\n%s", logLinesInErrors, proc.LogPath(), proc.Tail(logLinesInErrors))
}

// HTTPOK is a Check that passes when GET url answers 200.
func HTTPOK(url string) Check {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: status %d", url, resp.StatusCode)
		}
		return nil
	}
}

// TemporalReady returns a Check that passes when the frontend at address is healthy and serves namespace, and
// a function that releases the check's client.
func TemporalReady(address, namespace string) (Check, func(), error) {
	return TemporalReadyWith(client.Options{HostPort: address, Namespace: namespace, Logger: QuietSDKLogger()})
}

// TemporalReadyWith is TemporalReady for a client with opts (a server that wants TLS and a token).
func TemporalReadyWith(opts client.Options) (Check, func(), error) {
	address, namespace := opts.HostPort, opts.Namespace
	c, err := client.NewLazyClient(opts)
	if err != nil {
		return nil, nil, fmt.Errorf("temporal client for %s: %w", address, err)
	}
	check := func(ctx context.Context) error {
		if _, err := c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
			return fmt.Errorf("health of %s: %w", address, err)
		}
		_, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
		if err != nil {
			return fmt.Errorf("namespace %q on %s: %w", namespace, address, err)
		}
		return nil
	}
	return check, c.Close, nil
}

// QuietSDKLogger keeps the SDK's connection chatter out of a terminal the launcher shares with its user.
func QuietSDKLogger() sdklog.Logger {
	return sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
}
