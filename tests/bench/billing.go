package main

import (
	"context"
	"fmt"
	"log"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/captchaflow/captchaflow"
)

// Activity type names as registered (workflows.Register registers the Activities struct's methods).
const (
	submitActivity = "Submit"
	pollActivity   = "Poll"
)

// billingPerGroup is how many tasks of each callback-path kind the billing phase runs.
const billingPerGroup = 5

// The billing phase's poll-path tasks: a pingback dropped, solved so that they need billingPollsFew and
// billingPollsMany res.php requests; the difference in actions, divided by the difference in polls, is the price
// of one poll.
const (
	billingPollsFew  = 1
	billingPollsMany = 4
)

// BillingResult is Temporal Cloud's billable actions per task on each path, counted from the tasks' histories
// (countActions), and, on the dev server, the server's own action metric over the phase.
type BillingResult struct {
	Groups []BillingGroup `json:"groups"`
	// PerPoll is (actions at billingPollsMany polls − actions at billingPollsFew) / (many − few).
	PerPoll float64 `json:"actions_per_poll"`
	// ResubmissionExtra is the mean actions of a task resubmitted once minus those of the parked callback path.
	ResubmissionExtra float64 `json:"resubmission_extra_actions"`
	// HistoryTotal is the sum of every task's countActions total; ServerActions the dev server's action metric
	// (frontend) over the phase by action type, when it has one. Heartbeats and queries appear only there.
	HistoryTotal       int              `json:"history_total"`
	ServerActions      map[string]int64 `json:"server_actions,omitempty"`
	ServerActionsTotal int64            `json:"server_actions_total,omitempty"`
	ServerHeartbeats   int64            `json:"server_heartbeats"`
	ServerQueries      int64            `json:"server_queries"`
	ServerNote         string           `json:"server_note,omitempty"`
}

// BillingGroup is one kind of task.
type BillingGroup struct {
	Name   string `json:"name"`
	Tasks  int    `json:"tasks"`
	Failed int    `json:"failed"`
	// Polls is the res.php requests the poll-path tasks take (0 otherwise); Submits the in.php submissions.
	Polls   int     `json:"polls,omitempty"`
	Submits float64 `json:"submits_per_task"`
	// Mean and Max are the total actions per task; Example is the first task's breakdown.
	Mean     float64        `json:"mean"`
	Max      int            `json:"max"`
	Example  Actions        `json:"example"`
	Attempts map[string]int `json:"example_attempts_by_activity"`
	// Markers names the first task's markers (a GetVersion marker by its change ID).
	Markers []string `json:"example_markers,omitempty"`
}

type billingSpec struct {
	name  string
	n     int
	polls int
	in    captchaflow.Input
}

func (b *bench) billingSpecs() []billingSpec {
	parked := solveInput(map[string]string{"sim_solve_ms": "2000"})
	resub := solveInput(map[string]string{"sim_solve_ms": "500", "sim_fault": "unsolvable_pingback"})
	pollIn := func(k int) captchaflow.Input { return droppedInput((pollCallbackTimeout + (k-1)*pollInterval) * 1000) }
	return []billingSpec{
		{name: "callback path, solved at once", n: billingPerGroup, in: solveInput(nil)},
		{name: "callback path, parked (2 s solve)", n: billingPerGroup, in: parked},
		{name: fmt.Sprintf("poll path, %d poll", billingPollsFew), n: 1, polls: billingPollsFew, in: pollIn(billingPollsFew)},
		{name: fmt.Sprintf("poll path, %d polls", billingPollsMany), n: 1, polls: billingPollsMany, in: pollIn(billingPollsMany)},
		{name: "resubmission (first task unsolvable, its pingback says so)", n: billingPerGroup, in: resub},
	}
}

// billing runs each kind of task with nothing else running and counts their billable actions.
func (b *bench) billing(ctx context.Context) (*BillingResult, error) {
	specs := b.billingSpecs()
	log.Printf("billing: %d kinds of task, counting Temporal Cloud billable actions", len(specs))
	metricsURL := b.st.TemporalMetricsURL()
	var before map[string]int64
	var serverErr error
	if metricsURL != "" {
		before, serverErr = scrapeActions(ctx, metricsURL)
	}
	groups := make([]BillingGroup, len(specs))
	perTask := make([][]Actions, len(specs))
	var wg sync.WaitGroup
	for i, sp := range specs {
		wg.Go(func() { groups[i], perTask[i] = b.billingGroup(ctx, i, sp) })
	}
	wg.Wait()
	br := &BillingResult{Groups: groups}
	for _, as := range perTask {
		for _, a := range as {
			br.HistoryTotal += a.Total
		}
	}
	few, many, parked, resub := groups[2], groups[3], groups[1], groups[4]
	br.PerPoll = round2((many.Mean - few.Mean) / float64(billingPollsMany-billingPollsFew))
	br.ResubmissionExtra = round2(resub.Mean - parked.Mean)
	b.serverActions(ctx, br, metricsURL, before, serverErr)
	for _, g := range groups {
		log.Printf("billing: %s: %.2f actions per task (max %d) %+v", g.Name, g.Mean, g.Max, g.Example)
	}
	log.Printf("billing: %.2f actions per poll, %.2f per resubmission; server heartbeats %d, queries %d",
		br.PerPoll, br.ResubmissionExtra, br.ServerHeartbeats, br.ServerQueries)
	return br, nil
}

// billingGroup runs one kind of task and counts each task's actions.
func (b *bench) billingGroup(ctx context.Context, i int, sp billingSpec) (BillingGroup, []Actions) {
	g := BillingGroup{Name: sp.name, Tasks: sp.n, Polls: sp.polls}
	prefix := fmt.Sprintf("bench-%s-billing-%d-", b.runID, i)
	results := &sync.Map{}
	runs := drive(ctx, ids(prefix, 0, sp.n), sp.n, b.runOurs(sp.in, results))
	g.Failed, _ = failures(runs)
	var out []Actions
	sum, submits := 0, 0
	for _, r := range runs {
		if v, ok := results.Load(r.ID); ok {
			submits += v.(captchaflow.Result).Submits
		}
		events, err := b.fullHistory(ctx, r.ID)
		if err != nil {
			log.Printf("billing: history of %s: %v", r.ID, err)
			continue
		}
		a := countActions(events)
		if len(out) == 0 {
			g.Example, g.Attempts, g.Markers = a, activityAttempts(events), markerNames(events)
		}
		out = append(out, a)
		sum += a.Total
		g.Max = max(g.Max, a.Total)
	}
	if len(out) > 0 {
		g.Mean = round2(float64(sum) / float64(len(out)))
	}
	g.Submits = round2(float64(submits) / float64(max(sp.n-g.Failed, 1)))
	return g, out
}

// serverActions records the dev server's action metric over the phase (every action the server metered, including
// heartbeats and queries, which no history shows).
func (b *bench) serverActions(ctx context.Context, br *BillingResult, metricsURL string, before map[string]int64, err error) {
	if metricsURL == "" {
		br.ServerNote = "external server: its action metric is not read"
		return
	}
	var after map[string]int64
	if err == nil {
		// The last workflow task completions are metered as they are answered; let the counters settle.
		_ = sleep(ctx, time.Second)
		after, err = scrapeActions(ctx, metricsURL)
	}
	if err != nil {
		br.ServerNote = "server action metric: " + err.Error()
		return
	}
	br.ServerActions = map[string]int64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			br.ServerActions[k] = d
			br.ServerActionsTotal += d
			lk := strings.ToLower(k)
			switch {
			case strings.Contains(lk, "heartbeat"):
				br.ServerHeartbeats += d
			case strings.Contains(lk, "query"):
				br.ServerQueries += d
			}
		}
	}
	if len(after) == 0 {
		br.ServerNote = "the server exports no action metric"
	}
}

// scrapeActions reads the Temporal server's `action` counter by action type (the frontend's, when labelled by
// service). Series without a type label are keyed by their whole label set.
func scrapeActions(ctx context.Context, metricsURL string) (map[string]int64, error) {
	out := map[string]int64{}
	err := eachMetricLine(ctx, metricsURL, func(line string) {
		if key, v, ok := parseActionSample(line); ok {
			out[key] += v
		}
	})
	return out, err
}

// parseActionSample reads one `action{...} value` line of the Prometheus text format.
func parseActionSample(line string) (key string, v int64, ok bool) {
	rest, found := strings.CutPrefix(line, "action{")
	if !found {
		return "", 0, false
	}
	labels, value, found := strings.Cut(rest, "} ")
	if !found {
		return "", 0, false
	}
	f, err := strconv.ParseFloat(strings.Fields(value)[0], 64)
	if err != nil {
		return "", 0, false
	}
	kv := map[string]string{}
	for _, l := range strings.Split(labels, ",") {
		k, val, _ := strings.Cut(l, "=")
		kv[strings.TrimSpace(k)] = strings.Trim(val, `"`)
	}
	if s, has := kv["service_name"]; has && s != "frontend" {
		return "", 0, false
	}
	if t, has := kv["action_type"]; has {
		return t, int64(f), true
	}
	return labels, int64(f), true
}

// markerNames lists the history's markers: "Version:<change ID>" for GetVersion, else the marker's name.
func markerNames(events []*historypb.HistoryEvent) []string {
	var out []string
	for _, e := range events {
		if e.GetEventType() != enums.EVENT_TYPE_MARKER_RECORDED {
			continue
		}
		at := e.GetMarkerRecordedEventAttributes()
		name := at.GetMarkerName()
		if p := at.GetDetails()["change-id"].GetPayloads(); len(p) > 0 {
			name += ":" + strings.Trim(string(p[0].GetData()), `"`)
		}
		out = append(out, name)
	}
	return out
}

// fullHistory is a closed workflow's events with their attributes.
func (b *bench) fullHistory(ctx context.Context, id string) ([]*historypb.HistoryEvent, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	it := b.c.GetWorkflowHistory(ctx, id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var out []*historypb.HistoryEvent
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// billingRows are the billing phase's rows in the measures table.
func (m *markdown) billingRows(r *Results) {
	br := r.Billing
	if br == nil {
		return
	}
	for _, g := range br.Groups {
		markers := ""
		if len(g.Markers) > 0 {
			markers = "; markers: " + strings.Join(g.Markers, ", ")
		}
		m.p("| billable actions per task (Temporal Cloud), %s: mean / max; first task's breakdown | %.2f / %d; %s%s | | |\n",
			g.Name, g.Mean, g.Max, actionsBreakdown(g.Example, g.Attempts), markers)
	}
	m.p("| billable actions per res.php poll (poll path, %d vs %d polls) | %.2f | | |\n", billingPollsMany, billingPollsFew, br.PerPoll)
	m.p("| billable actions added by one resubmission (vs the parked callback path) | %.2f | | |\n", br.ResubmissionExtra)
	if br.ServerNote != "" {
		m.p("| activity heartbeats / queries reaching the server during the billing phase | — (%s) | | |\n", br.ServerNote)
		return
	}
	m.p("| activity heartbeats / queries reaching the server during the billing phase (server action metric) | %d / %d | | |\n",
		br.ServerHeartbeats, br.ServerQueries)
	m.p("| all actions the server metered during the billing phase vs the histories' count | %d vs %d | | |\n",
		br.ServerActionsTotal, br.HistoryTotal)
}

// actionsBreakdown names the non-zero parts of a task's actions.
func actionsBreakdown(a Actions, attempts map[string]int) string {
	var parts []string
	add := func(n int, what string) {
		if n != 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(a.WorkflowStarted, "start")
	add(a.ActivitiesScheduled, "activities scheduled")
	add(a.ActivityRetries, "activity retries")
	add(a.MarkerTasks, "marker tasks")
	add(a.LocalActivityRetries, "local activity retries")
	add(a.Timers, "timers")
	add(a.Signals, "signals")
	add(a.Upserts, "upserts")
	add(a.ChildWorkflows, "child workflow")
	add(a.Other, "other")
	s := strings.Join(parts, " + ")
	if len(attempts) > 0 {
		var at []string
		for _, k := range slices.Sorted(maps.Keys(attempts)) {
			at = append(at, fmt.Sprintf("%s %d", k, attempts[k]))
		}
		s += " (attempts: " + strings.Join(at, ", ") + ")"
	}
	return s
}
