package tests

// Token freshness (issue #10 §3) on the real stack: notify_url is down for longer than a short token_ttl_seconds;
// the worker never delivers the expired token, solves again and delivers the fresh one, or — refreshing turned
// off — fails TokenExpired with the last result in the failure's details.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

// freshnessTTL is the e2e tasks' token_ttl_seconds: long enough for a refresh to solve (the simulator takes
// 200 ms) and short enough for the test.
const freshnessTTL = 10

func TestE2E_TokenRefreshedWhileDownstreamDown(t *testing.T) {
	s := requireStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sc := newScenario(t, s, "token-freshness")
	refreshed := sc.add(1, taskSpec{Kind: "token-refreshed-delivered", SolveMS: 200})[0]
	noRefresh := sc.add(1, taskSpec{Kind: "token-expired-no-refresh", SolveMS: 200})[0]
	byMethod := sc.add(1, taskSpec{Kind: "callback-timeout-by-method-default", SolveMS: 200})[0]

	in := s.input(refreshed.taskSpec)
	in.TokenTTLSeconds = freshnessTTL // max_refreshes unset: the default, 1
	off := s.input(noRefresh.taskSpec)
	off.TokenTTLSeconds = freshnessTTL
	zero := 0
	off.MaxRefreshes = &zero

	require.NoError(t, s.down.Down())
	downSince := time.Now()
	t.Cleanup(func() { _ = s.down.Up() })
	runs := map[string]func() (captchaflow.Result, error){}
	for id, input := range map[string]captchaflow.Input{refreshed.ID: in, noRefresh.ID: off} {
		run, err := captchaflow.Start(ctx, s.c, id, input)
		require.NoError(t, err, id)
		runs[id] = func() (captchaflow.Result, error) {
			var r captchaflow.Result
			return r, run.Get(ctx, &r)
		}
	}

	// The refresh: a second provider task for the same workflow once the first token expired undelivered.
	var first sim.Task
	require.Eventually(t, func() bool {
		tasks, err := s.simTasks(ctx, "/callback/"+refreshed.ID)
		if err != nil || len(tasks) < 2 || tasks[1].Status != sim.StatusSolved {
			return false
		}
		first = tasks[0]
		return true
	}, 60*time.Second, 100*time.Millisecond, "no refresh submission after the first token expired")
	// The receiver stays down until the first token has certainly expired (its callback came right after the
	// provider solved it), then comes back while the fresh one lives.
	require.NotNil(t, first.SolvedAt)
	time.Sleep(time.Until(first.SolvedAt.Add(freshnessTTL*time.Second + time.Second)))
	require.NoError(t, s.down.Up())
	outage := time.Since(downSince)
	sc.note("notify_url refused connections for %s, past the first token's expiry (token_ttl_seconds=%d)", outage.Round(time.Millisecond), freshnessTTL)
	require.Greater(t, outage, freshnessTTL*time.Second)

	res, err := runs[refreshed.ID]()
	require.NoError(t, err)
	assert.Equal(t, 1, res.Refreshes)
	assert.Equal(t, 2, res.Submits, "one paid refresh")
	assert.NotEqual(t, first.Code, res.Code, "the fresh token, not the expired one")
	assert.Equal(t, freshnessTTL*time.Second, res.ExpiresAt.Sub(res.ReceivedAt))
	d, ok := s.down.Delivery(refreshed.ID)
	require.True(t, ok, "the fresh token was delivered")
	assert.Equal(t, res.Code, d.Payload.Code)
	assert.True(t, d.FirstAt.Before(d.Payload.ExpiresAt), "delivered at %s, expires %s", d.FirstAt, d.Payload.ExpiresAt)
	for _, dl := range s.down.Deliveries() {
		assert.NotEqual(t, first.Code, dl.Payload.Code, "the expired token was delivered")
		if dl.Payload.TaskID == refreshed.ID || dl.Payload.TaskID == noRefresh.ID {
			assert.True(t, dl.FirstAt.Before(dl.Payload.ExpiresAt), "%s delivered after it expired", dl.Payload.TaskID)
		}
	}

	_, err = runs[noRefresh.ID]()
	require.Error(t, err)
	assert.Equal(t, captchaflow.FailureTokenExpired, captchaflow.FailureType(err), "%v", err)
	var appErr *temporal.ApplicationError
	require.True(t, errors.As(err, &appErr))
	var last captchaflow.Result
	require.NoError(t, appErr.Details(&last))
	assert.NotEmpty(t, last.Code)
	assert.Zero(t, last.Refreshes)
	assert.Equal(t, 1, last.Submits, "max_refreshes=0: nothing more paid for")
	_, delivered := s.down.Delivery(noRefresh.ID)
	assert.False(t, delivered, "the expired token was never delivered")
	tasks, err := s.simTasks(ctx, "/callback/"+noRefresh.ID)
	require.NoError(t, err)
	assert.Len(t, tasks, 1)

	// A task that leaves callback_timeout_seconds to the worker's default records the value it took (the e2e
	// worker has no CALLBACK_TIMEOUT_BY_METHOD: 120 s), and its callback still wins at once.
	dflt := s.input(byMethod.taskSpec)
	dflt.CallbackTimeoutSeconds = 0
	got, err := captchaflow.Solve(ctx, s.c, byMethod.ID, dflt)
	require.NoError(t, err)
	assert.Equal(t, captchaflow.ViaCallback, got.Via)
	assert.Equal(t, 120*time.Second, got.ExpiresAt.Sub(got.ReceivedAt), "userrecaptcha's lifetime")

	sc.note("refreshed: first token %s… expired undelivered, fresh token delivered %s before its expiry; max_refreshes=0: TokenExpired, 1 submission",
		first.Code[:min(8, len(first.Code))], d.Payload.ExpiresAt.Sub(d.FirstAt).Round(time.Millisecond))

	ids := []string{refreshed.ID, noRefresh.ID, byMethod.ID}
	replayLive(t, s, ids...)
	recordNew(t, s, map[string]string{refreshed.Kind: refreshed.ID, noRefresh.Kind: noRefresh.ID, byMethod.Kind: byMethod.ID,
		"token-refresh-round": refreshed.ID})
}
