package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

// simClient reads the provider simulator's control API.
type simClient struct {
	base string
	http *http.Client
}

func newSimClient(base string) *simClient {
	return &simClient{base: base, http: &http.Client{Timeout: 60 * time.Second}}
}

// tasksByWorkflow lists the simulator's tasks whose pingback goes to a workflow whose ID starts with prefix,
// grouped by workflow ID (one entry per submission).
func (s *simClient) tasksByWorkflow(ctx context.Context, prefix string) (map[string][]sim.Task, error) {
	var list sim.TaskList
	q := url.Values{"pingback_path_prefix": {"/callback/" + prefix}}
	if err := s.get(ctx, "/_sim/tasks?"+q.Encode(), &list); err != nil {
		return nil, err
	}
	out := map[string][]sim.Task{}
	for _, t := range list.Tasks {
		wf := strings.TrimPrefix(t.PingbackPath, "/callback/")
		out[wf] = append(out[wf], t)
	}
	return out, nil
}

func (s *simClient) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+path, nil)
	if err != nil {
		return err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d", path, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// firstPingback is when the provider sent the task's first pingback (or dropped it, for drop_pingback).
func firstPingback(t sim.Task) (time.Time, sim.PingbackOutcome, bool) {
	for _, p := range t.Pingbacks {
		if p.Kind == sim.PingbackFirst {
			return p.At, p.Outcome, true
		}
	}
	return time.Time{}, "", false
}

// eachMetricLine GETs a Prometheus text endpoint and hands each line to fn.
func eachMetricLine(ctx context.Context, metricsURL string, fn func(line string)) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, metricsURL, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d", metricsURL, resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		fn(sc.Text())
	}
	return sc.Err()
}

// scrapeMetrics reads the named gauges (unlabelled samples) from a Prometheus text endpoint.
func scrapeMetrics(ctx context.Context, metricsURL string, names ...string) (map[string]float64, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]float64{}
	err := eachMetricLine(ctx, metricsURL, func(line string) {
		if line == "" || line[0] == '#' {
			return
		}
		name, value, ok := strings.Cut(line, " ")
		if !ok || !want[name] {
			return
		}
		if f, err := strconv.ParseFloat(strings.Fields(value)[0], 64); err == nil {
			out[name] = f
		}
	})
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			return out, fmt.Errorf("%s has no %s", metricsURL, n)
		}
	}
	return out, nil
}
