// Package tests holds captchaflow's end-to-end chaos tests and the deterministic replay tests.
//
// The chaos tests run the real stack as processes on 127.0.0.1 (the pinned Temporal CLI dev server on a fresh
// SQLite file, the provider simulator, the worker and the ingress, built once per run), with toxiproxy embedded in
// front of the ingress and between the ingress and Temporal, and the webhook receiver of devstack/downstream as
// the customer's notify_url. One stack is shared by every test; it is started by the first test that needs it,
// so the replay tests run without any server.
//
//	go test ./tests/ -count=1 -timeout 15m                       everything
//	go test ./tests/ -run 'Replay|Secrets'                        replay only (no server)
//	RECORD_HISTORIES=1 go test ./tests/ -run Record               re-record testdata/*.json
//	E2E_TEMPORAL_ADDRESS=127.0.0.1:7333 \
//	E2E_TEMPORAL_RESTART_CMD='cluster/down.sh && cluster/up.sh --detach' \
//	  go test ./tests/ -count=1 -run Core                         happy path, worker kill, server restart on an external cluster
//
// Figures (tasks, delivered, via callback, via poll, wall time per scenario) go to tests/out/.
package tests

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

var (
	stackOnce sync.Once
	theStack  *stack
	stackErr  error
)

// requireStack returns the shared stack, starting it on first use. Without the Temporal CLI it skips locally
// and fails in CI (CI set), where a missing CLI means a broken pipeline.
func requireStack(t *testing.T) *stack {
	t.Helper()
	stackOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		started := time.Now()
		theStack, stackErr = startStack(ctx)
		if stackErr == nil {
			where := "local server " + theStack.temporalAddr
			if theStack.external() {
				where = "external Temporal " + theStack.temporalAddr
			}
			fmt.Printf("e2e: stack up in %s (%s, logs in %s)\n", time.Since(started).Round(time.Millisecond), where, theStack.runDir)
		}
	})
	if errors.Is(stackErr, errServerMissing) {
		if os.Getenv("CI") != "" {
			t.Fatalf("e2e: %v — CI must build it first (tools/build.sh)", stackErr)
		}
		t.Skipf("e2e: %v", stackErr)
	}
	if stackErr != nil {
		t.Fatalf("e2e: starting the stack: %v", stackErr)
	}
	return theStack
}

func TestMain(m *testing.M) {
	code := m.Run()
	if theStack != nil {
		theStack.stop()
		if code == 0 && os.Getenv(envKeepLogs) == "" {
			_ = os.RemoveAll(theStack.runDir)
		} else {
			fmt.Printf("e2e: logs kept in %s\n", theStack.runDir)
		}
	}
	if err := writeFigures(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: writing figures:", err)
	}
	os.Exit(code)
}
