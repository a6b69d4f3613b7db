package tests

// Helpers of the issue #9 scenarios (error-code pingbacks, in.php error classes, callback flood, scale-out).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

// simStats reads the simulator's counters (GET /_sim/stats); newScenario reset them.
func (s *stack) simStats(ctx context.Context) (sim.Stats, error) { return simStatsAt(ctx, s.simURL()) }

// simStatsAt reads the counters of the simulator at base.
func simStatsAt(ctx context.Context, base string) (sim.Stats, error) {
	var st sim.Stats
	status, body, err := httpGet(ctx, base+"/_sim/stats")
	if err != nil {
		return st, err
	}
	if status != http.StatusOK {
		return st, fmt.Errorf("GET /_sim/stats: %d %s", status, body)
	}
	return st, json.Unmarshal([]byte(body), &st)
}

// startEach starts every task of the scenario with the input inputFor gives it (the scenario's rules must be
// installed first); it records the scenario's start time like startWorkflows.
func (sc *scenario) startEach(ctx context.Context, trs []*taskRun, inputFor func(*taskRun) captchaflow.Input) {
	sc.t.Helper()
	if sc.started.IsZero() {
		sc.started = time.Now()
	}
	errs := parallel(len(trs), 8, func(i int) error {
		_, err := captchaflow.Start(ctx, sc.s.c, trs[i].ID, inputFor(trs[i]))
		return err
	})
	require.NoError(sc.t, errors.Join(errs...), "starting the workflows")
}

// awaitOutcomes waits for every task to end, successfully or not, and records results and failures; only a task
// that did not end within timeout fails the test here.
func (sc *scenario) awaitOutcomes(ctx context.Context, timeout time.Duration) {
	sc.t.Helper()
	sc.awaitAll(ctx, timeout)
	var stuck []string
	for _, tr := range sc.tasks {
		var execErr *temporal.WorkflowExecutionError
		if tr.Err != nil && !errors.As(tr.Err, &execErr) {
			stuck = append(stuck, fmt.Sprintf("%s (%s): %v", tr.ID, tr.Kind, tr.Err))
		}
	}
	require.Empty(sc.t, stuck, "tasks that did not end within %s", timeout)
}

// failureType is the ApplicationError type a failed workflow ended with ("" if none).
func failureType(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		return appErr.Type()
	}
	return ""
}

// eventCount counts a history's events of one type.
func eventCount(h *historypb.History, typ enumspb.EventType) int {
	n := 0
	for _, ev := range h.GetEvents() {
		if ev.GetEventType() == typ {
			n++
		}
	}
	return n
}

// activitiesScheduled counts the scheduled activities of one type (a Poll is the fallback poll or a res.php
// confirmation of a callback).
func activitiesScheduled(h *historypb.History, name string) int {
	n := 0
	for _, ev := range h.GetEvents() {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == name {
			n++
		}
	}
	return n
}

// timerDurations lists the durations of the timers a workflow started, in order.
func timerDurations(h *historypb.History) []time.Duration {
	var out []time.Duration
	for _, ev := range h.GetEvents() {
		if a := ev.GetTimerStartedEventAttributes(); a != nil {
			out = append(out, a.GetStartToFireTimeout().AsDuration())
		}
	}
	return out
}

// workflowStartedAt is the time of a history's first event.
func workflowStartedAt(h *historypb.History) time.Time {
	if len(h.GetEvents()) == 0 {
		return time.Time{}
	}
	return h.GetEvents()[0].GetEventTime().AsTime()
}

// percentile is the nearest-rank p-th percentile (0 < p <= 100) of xs; 0 for none.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

// clientFrom is an HTTP client whose connections leave from the loopback address srcIP (any 127.0.0.0/8 address
// works on Linux): the ingress rate-limits the untokened route per client address, so tests choose theirs.
func clientFrom(srcIP string, conns int) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(srcIP)}}
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			DialContext:         d.DialContext,
			MaxIdleConns:        conns,
			MaxIdleConnsPerHost: conns,
			IdleConnTimeout:     30 * time.Second,
		},
	}
}

// getStatus GETs url with c and returns the status and how long the answer took (headers and body read).
func getStatus(ctx context.Context, c *http.Client, url string) (int, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return 0, time.Since(start), err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	return resp.StatusCode, time.Since(start), nil
}

// statusCounts renders a status histogram as "200×980 429×20".
func statusCounts(m map[int]int) string {
	codes := make([]int, 0, len(m))
	for c := range m {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	var parts []string
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%d×%d", c, m[c]))
	}
	return strings.Join(parts, " ")
}
