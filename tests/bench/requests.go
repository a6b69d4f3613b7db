package main

// Temporal requests per task: the history service's request counter, read around each measured segment. Unlike CPU
// it does not move with the machine's load, so one more server write per task (a heartbeat, a query) shows plainly.

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// serverMetricsLag outlasts the server's metrics reporting interval (tally's default, 1 s): a request is counted then.
const serverMetricsLag = 1200 * time.Millisecond

// requestMeter adds up the history service's requests by operation over the segments it measures.
type requestMeter struct {
	url   string
	total map[string]float64
	err   error
}

func newRequestMeter(url string) *requestMeter {
	return &requestMeter{url: url, total: map[string]float64{}}
}

// measure runs f between two scrapes; the caller keeps them outside the CPU meter's window (a scrape costs CPU).
func (m *requestMeter) measure(ctx context.Context, f func()) {
	if m.url == "" {
		f()
		return
	}
	time.Sleep(serverMetricsLag) // what ran before is counted before
	before, err := scrapeHistoryRequests(ctx, m.url)
	f()
	time.Sleep(serverMetricsLag)
	after, err2 := scrapeHistoryRequests(ctx, m.url)
	if m.err = cmp.Or(m.err, err, err2); m.err != nil {
		return
	}
	for op, v := range after {
		m.total[op] += v - before[op]
	}
}

// perTask is each operation's requests per task (nil when the server's metrics were not read).
func (m *requestMeter) perTask(tasks int) map[string]float64 {
	if m.url == "" || m.err != nil {
		return nil
	}
	out := map[string]float64{}
	for op, v := range m.total {
		if per := v / float64(max(tasks, 1)); per >= 0.005 {
			out[op] = round2(per)
		}
	}
	return out
}

// scrapeHistoryRequests reads service_requests{service_name="history"} by operation.
func scrapeHistoryRequests(ctx context.Context, metricsURL string) (map[string]float64, error) {
	out := map[string]float64{}
	err := eachMetricLine(ctx, metricsURL, func(line string) {
		rest, ok := strings.CutPrefix(line, "service_requests{")
		labels, value, found := strings.Cut(rest, "} ")
		if !ok || !found || !strings.Contains(labels, `service_name="history"`) {
			return
		}
		_, op, _ := strings.Cut(labels, `operation="`)
		op, _, _ = strings.Cut(op, `"`)
		if f, err := strconv.ParseFloat(strings.Fields(value)[0], 64); err == nil {
			out[op] += f
		}
	})
	return out, err
}

// requestsCell is a side's history requests per task, naming the operations where the sides differ by ≥ 0.2.
func requestsCell(side, other map[string]float64) string {
	if side == nil {
		return "—"
	}
	var total float64
	var diff []string
	ops := maps.Clone(side)
	for op := range other {
		ops[op] += 0 // an operation only the other side made is 0 here
	}
	for _, op := range slices.Sorted(maps.Keys(ops)) {
		total += side[op]
		if math.Abs(side[op]-other[op]) >= 0.2 {
			diff = append(diff, fmt.Sprintf("%s %.2f", op, side[op]))
		}
	}
	if len(diff) == 0 {
		return fmt.Sprintf("%.1f", total)
	}
	return fmt.Sprintf("%.1f (%s)", total, strings.Join(diff, ", "))
}
