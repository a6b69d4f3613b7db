package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/internal/config"
)

// History events one callback adds to a workflow, as modelled here (the workflow's own choices may batch some):
//   - a signal: WorkflowExecutionSignaled, plus the workflow task it wakes (scheduled, started, completed);
//   - an accepted untokened update: WorkflowExecutionUpdateAccepted and …Completed, its workflow task, and the
//     res.php confirmation it leads to (the Poll activity: scheduled, started, completed);
//   - a rejected update: none (its speculative workflow task is dropped with it).
const (
	eventsPerSignal       = 1 + 3
	eventsPerAcceptedHint = 2 + 3 + 3
	dripPeriod            = 6 * time.Second // 14 400 requests in 24 h, one address
	dripDuration          = 24 * time.Hour
	dripCodeBytes         = 16 << 10
)

// hintModel is the validator the workflow's untokened update has (captchaflow.UntokenedHint): it accepts at most
// UntokenedHintsPerSubmission hints per provider task, and rejects the rest without a history event.
type hintModel struct {
	mu       sync.Mutex
	accepted map[string]int
}

func (m *hintModel) decide(_ context.Context, u sentUpdate) (rejection, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.accepted[u.Hint.ProviderTaskID] >= captchaflow.UntokenedHintsPerSubmission {
		return errors.New("untokened hints for this submission are spent"), nil
	}
	m.accepted[u.Hint.ProviderTaskID]++
	return nil, nil
}

// dripFigures are what one day of the drip did to the one workflow it targets, and what it cost Temporal.
type dripFigures struct {
	requests, signals, acceptedHints, events, lookups, updates int
	codeBytes                                                  int
}

// waitProcessed waits until n untokened callbacks have an outcome (answered at once, or processed in the background).
func waitProcessed(t *testing.T, e *testEnv, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		total := 0.0
		for _, o := range outcomes {
			total += e.callbacks(routeUntokened, o)
		}
		if int(total) >= n {
			return
		}
		require.True(t, time.Now().Before(deadline), "%d of %d untokened callbacks processed", int(total), n)
		time.Sleep(50 * time.Microsecond)
	}
}

// drip sends one untokened callback with a fresh 16 KiB code for the waiting task every dripPeriod, from one
// address, for dripDuration of a test clock, with the shipped limits.
func drip(t *testing.T) dripFigures {
	t.Setenv("CALLBACK_SECRET", testSecret)
	defaults, err := config.LoadIngress()
	require.NoError(t, err)
	e := newTestEnv(t, func(c *config.Ingress) {
		c.UntokenedRate, c.UntokenedRatePerIP = defaults.UntokenedRate, defaults.UntokenedRatePerIP
		c.CallbackBurst, c.CallbackRefill = defaults.CallbackBurst, defaults.CallbackRefill
	})
	clock := useTestClock(e)
	findsWaitingTask(e)
	model := &hintModel{accepted: map[string]int{}}
	e.fake.updateFn = model.decide
	code := strings.Repeat("x", dripCodeBytes-8)
	var f dripFigures
	for at := time.Duration(0); at < dripDuration; at += dripPeriod {
		f.requests++
		rec := e.getFrom(t, fmt.Sprintf("/callback?id=%s&code=%s%08d", waitingProviderID, code, f.requests), "203.0.113.9:4000", nil)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		waitProcessed(t, e, f.requests)
		clock.advance(dripPeriod)
	}
	for _, s := range e.fake.sent() {
		f.signals++
		f.codeBytes += len(s.Callback.Code)
	}
	f.acceptedHints = model.accepted[waitingProviderID]
	f.events = f.signals*eventsPerSignal + f.acceptedHints*eventsPerAcceptedHint
	f.lookups, f.updates = len(e.fake.listQueries()), len(e.fake.sentUpdates())
	return f
}

// TestUntokenedDripForADay (#15 §3f): one address sends an untokened callback with a fresh 16 KiB code for one
// waiting task every 6 s for 24 hours (14 400 requests), under the shipped limits, on a test clock. The workflow
// accepts UntokenedHintsPerSubmission (4) and rejects the rest without an event; the rejection closes the provider
// task at the ingress until an hour passes without a callback for it, so the drip costs Temporal nothing more.
func TestUntokenedDripForADay(t *testing.T) {
	if testing.Short() {
		t.Skip("14 400 requests through the handler")
	}
	after := drip(t)
	t.Logf("%d requests → %d accepted hints, ~%d history events; Temporal calls: %d visibility queries, %d updates",
		after.requests, after.acceptedHints, after.events, after.lookups, after.updates)
	assert.Zero(t, after.signals)
	assert.Zero(t, after.codeBytes, "no code reaches history")
	assert.Equal(t, captchaflow.UntokenedHintsPerSubmission, after.acceptedHints)
	assert.LessOrEqual(t, after.events, captchaflow.UntokenedHintsPerSubmission*eventsPerAcceptedHint)
	hours := int(dripDuration / time.Hour)
	assert.LessOrEqual(t, after.updates, captchaflow.UntokenedHintsPerSubmission+hours+1,
		"after the first rejection, at most one update an hour (rejectedHintTTL)")
	assert.Equal(t, after.updates, after.lookups, "one visibility query per update")
}
