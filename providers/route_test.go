package providers

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow"
)

func TestParseFileReadsPricesAndRouting(t *testing.T) {
	f, err := ParseFile([]byte(`
routing: scored
explore_share: 0.1
memory: 5
providers:
  - {name: a, protocol: inphp, base_url: "http://a", api_key_env: K, price_per_1000: 2.99}
  - {name: b, protocol: createtask, flavor: anticaptcha, api_key_env: K, price_per_1000: {default: 1, hcaptcha: 0.8}}
`), func(string) string { return "key" })
	require.NoError(t, err)
	assert.Equal(t, RoutingScored, f.Routing)
	assert.InDelta(t, 0.00299, f.Providers[0].PricePer1000.Of("turnstile"), 1e-12)
	assert.InDelta(t, 0.0008, f.Providers[1].PricePer1000.Of("hcaptcha"), 1e-12)
	assert.InDelta(t, 0.001, f.Providers[1].PricePer1000.Of("userrecaptcha"), 1e-12)
	m := NewModel(f)
	assert.True(t, m.Scored())
	assert.InDelta(t, 0.1, m.explore, 1e-12)

	set, err := Build(f, func(string) string { return "key" }, time.Second, DefaultCircuitSettings)
	require.NoError(t, err)
	assert.True(t, set.All()[0].Refunds, "in.php (2captcha's terms) refunds an unsolvable task")
	assert.False(t, set.All()[1].Refunds, "Anti-Captcha charges one")
	assert.False(t, NewModel(File{}).Scored(), "routing: order is the default")
}

func TestParseFileRefusesBadPricesAndKnobs(t *testing.T) {
	_, err := ParseFile([]byte(`
routing: cheapest
explore_share: 0.9
memory: 1
prior_solve_seconds: -1
providers:
  - {name: a, protocol: inphp, base_url: "http://a", api_key_env: K, price_per_1000: -1}
  - {name: b, protocol: inphp, base_url: "http://b", api_key_env: K, price_per_1000: {hcaptcha: .nan}}
`), func(string) string { return "key" })
	require.Error(t, err)
	for _, field := range []string{"routing:", "explore_share:", "memory:", "prior_solve_seconds:",
		"providers[0].price_per_1000.default:", "providers[1].price_per_1000.hcaptcha:"} {
		assert.Contains(t, err.Error(), field)
	}
	_, err = ParseFile([]byte("providers:\n  - {name: a, protocol: inphp, base_url: \"http://a\", api_key_env: K, price_per_1000: [1]}\n"),
		func(string) string { return "key" })
	assert.ErrorContains(t, err, "not a providers file")
}

func TestP90CountsStillOpenSubmissionsAsAtLeast(t *testing.T) {
	var fast []solveTime
	for range 20 {
		fast = append(fast, solveTime{secs: 5})
	}
	assert.Equal(t, 5.0, p90(fast, 30), "twenty solves outweigh the prior")
	assert.Equal(t, 30.0, p90(nil, 30), "nothing measured: the prior")
	assert.Equal(t, 240.0, p90([]solveTime{{secs: 120, open: true}}, 30), "open after 120 s: beyond it")
	assert.Equal(t, 200.0, p90(append(fast[:3:3], solveTime{secs: 200}, solveTime{secs: 100, open: true}), 30))
}

// simProvider behaves by task number; a scenario runs tasks through a Model as the activities and workflow would.
type simProvider struct {
	name       string
	per1000    float64
	secs       float64
	refunds    bool
	unsolvable func(task int) bool
	bad        func(task int) bool
}

type simRun struct {
	first            []string // each task's first submission's provider
	explored         []bool
	cost, static     float64 // what the tasks cost, and what routing: order would have
	good, staticGood int     // the good codes of each
}

func (r simRun) share(name string, from, to int) float64 {
	n := 0
	for _, p := range r.first[from:to] {
		if p == name {
			n++
		}
	}
	return float64(n) / float64(to-from)
}

// movedBy is how many tasks after from it took until the model's own choice (not exploring) left name, or chose it.
func (r simRun) movedBy(name string, from int, away bool) int {
	for i := from; i < len(r.first); i++ {
		if !r.explored[i] && (r.first[i] == name) != away {
			return i - from
		}
	}
	return -1
}

// simulate runs tasks under m, and under routing: order for the comparison.
func simulate(m *Model, sims []simProvider, tasks int, deadline time.Duration) simRun {
	run := simulateUnder(m, sims, tasks, deadline, 2*time.Second)
	order := simulateUnder(NewModel(File{}), sims, tasks, deadline, 2*time.Second)
	run.static, run.staticGood = order.cost, order.good
	return run
}

// simulateUnder starts a task every every (the model's clock), each ending before the next starts.
func simulateUnder(m *Model, sims []simProvider, tasks int, deadline, every time.Duration) (run simRun) {
	clock := time.Unix(1e9, 0)
	m.now = func() time.Time { return clock }
	var ps []*Provider
	for _, s := range sims {
		ps = append(ps, &Provider{Name: s.name, Price: Price{"default": s.per1000}, Refunds: s.refunds})
	}
	outcome := func(s simProvider, task int) (paid float64, solved bool, secs float64) {
		switch {
		case s.unsolvable != nil && s.unsolvable(task):
			return map[bool]float64{true: 0, false: s.per1000 / 1000}[s.refunds], false, 0
		case s.secs > deadline.Seconds():
			return s.per1000 / 1000, false, deadline.Seconds()
		}
		return s.per1000 / 1000, true, s.secs
	}
	for task := range tasks {
		clock = clock.Add(every)
		var avoid []string
		for sub := 1; sub <= 3; sub++ {
			ranked, route := NewSet(ps, nil).Candidates(nil, nil, avoid), &captchaflow.Route{}
			if m.Scored() {
				ranked, route = m.Rank(ps, "turnstile", avoid, deadline, fmt.Sprint("task", task, "/", sub), nil)
			}
			s := simByName(sims, ranked[0].Name)
			if sub == 1 {
				run.first, run.explored = append(run.first, s.name), append(run.explored, route.Reason == captchaflow.RouteExplore)
			}
			paid, solved, secs := outcome(s, task)
			run.cost += paid
			switch {
			case solved:
				m.Learn(Obs{Provider: s.name, Method: "turnstile", Seconds: secs, Outcome: ObservedSolved})
				if s.bad != nil && s.bad(task) {
					m.Verdict(s.name, "turnstile", false)
				} else {
					run.good++
				}
			case secs > 0:
				m.Learn(Obs{Provider: s.name, Method: "turnstile", Seconds: secs, Outcome: ObservedOpen})
			default:
				m.Learn(Obs{Provider: s.name, Method: "turnstile", Seconds: 0, Outcome: ObservedUnsolvable})
				avoid = append(avoid, s.name)
				continue
			}
			break
		}
	}
	return run
}

func simByName(sims []simProvider, name string) simProvider {
	for _, s := range sims {
		if s.name == name {
			return s
		}
	}
	panic(name)
}

func scoredModel(explore float64) *Model {
	return NewModel(File{Routing: RoutingScored, ExploreShare: &explore})
}

func logRun(t *testing.T, name string, run simRun) {
	t.Logf("%s: scored $%.4f for %d good codes ($%.5f each), order $%.4f for %d ($%.5f each)", name, run.cost, run.good,
		run.cost/float64(run.good), run.static, run.staticGood, run.static/float64(run.staticGood))
}

func TestScoredRoutingPrefersTheCheaperOfTwoAsFast(t *testing.T) {
	run := simulate(scoredModel(DefaultExploreShare), []simProvider{{name: "dear", per1000: 3, secs: 10}, {name: "cheap", per1000: 1, secs: 10}},
		100, time.Minute)
	logRun(t, "same speed", run)
	t.Logf("split: cheap %.0f%%", 100*run.share("cheap", 0, 100))
	assert.GreaterOrEqual(t, run.share("cheap", 0, 100), 0.9)
	assert.LessOrEqual(t, run.share("cheap", 0, 100), 1-DefaultExploreShare/4, "exploring goes on")
}

func TestScoredRoutingLeavesAnUnsolvingProviderAndComesBack(t *testing.T) {
	for _, refunds := range []bool{false, true} {
		broken := func(task int) bool { return task >= 30 && task < 60 }
		run := simulate(scoredModel(0.2), []simProvider{{name: "cheap", per1000: 1, secs: 10, refunds: refunds, unsolvable: broken},
			{name: "dear", per1000: 2, secs: 10}}, 150, time.Minute)
		away, back := run.movedBy("cheap", 30, true), run.movedBy("cheap", 60, false)
		logRun(t, fmt.Sprint("unsolvable, refunds=", refunds), run)
		t.Logf("refunds=%t: moved away after %d tasks, back %d tasks after it recovered; cheap before %.0f%%, broken %.0f%%, after %.0f%%",
			refunds, away, back, 100*run.share("cheap", 0, 30), 100*run.share("cheap", 30, 60), 100*run.share("cheap", 90, 150))
		assert.True(t, away >= 0 && away <= 6, "moved away within a handful of tasks: %d", away)
		assert.True(t, back >= 0 && back <= 30, "came back: %d", back)
		assert.Greater(t, run.share("cheap", 90, 150), 0.65, "explore_share 0.2 sends a fifth elsewhere")
	}
}

// Issue 31: a cheap provider shunned after a run of unsolvable answers was frozen at that estimate; only exploring
// (5 %) reached it after it recovered, and each solved exploration moved it little: 5 of the next 40 tasks.
func TestScoredRoutingWinsARecoveredProviderBackWithinAHandfulOfTasks(t *testing.T) {
	for _, refunds := range []bool{false, true} {
		broken := func(task int) bool { return task >= 20 && task < 60 }
		run := simulate(scoredModel(DefaultExploreShare), []simProvider{{name: "cheap", per1000: 1, secs: 10, refunds: refunds, unsolvable: broken},
			{name: "dear", per1000: 2, secs: 10}}, 100, time.Minute)
		back, share := run.movedBy("cheap", 60, false), run.share("cheap", 60, 100)
		t.Logf("refunds=%t: cheap while broken %.0f%% of first submissions; back %d tasks after it recovered, %d of the next 40",
			refunds, 100*run.share("cheap", 20, 60), back, int(40*share))
		assert.True(t, back >= 0 && back <= 6, "back within a handful of tasks: %d", back)
		assert.GreaterOrEqual(t, share, 0.8, "most of the next 40")
		assert.LessOrEqual(t, run.share("cheap", 25, 60), 0.25, "while broken, probes and exploring only")
	}
}

func TestScoredRoutingAvoidsAProviderSlowerThanTheDeadline(t *testing.T) {
	run := simulate(scoredModel(DefaultExploreShare), []simProvider{{name: "slow", per1000: 1, secs: 600}, {name: "quick", per1000: 2, secs: 10}},
		50, time.Minute)
	logRun(t, "slow", run)
	assert.LessOrEqual(t, run.share("slow", 0, 50), 1/50.0, "after its first task timed out, never again (exploring keeps to those in time)")
}

func TestScoredRoutingLeavesAProviderWhoseCodesAreReportedBad(t *testing.T) {
	run := simulate(scoredModel(DefaultExploreShare), []simProvider{
		{name: "cheap", per1000: 1, secs: 10, bad: func(task int) bool { return task >= 20 }}, {name: "dear", per1000: 1.5, secs: 10}},
		80, time.Minute)
	logRun(t, "bad verdicts", run)
	t.Logf("bad verdicts: moved away after %d tasks; cheap %.0f%% after", run.movedBy("cheap", 20, true), 100*run.share("cheap", 40, 80))
	assert.GreaterOrEqual(t, run.share("cheap", 0, 20), 0.85)
	assert.Less(t, run.share("cheap", 40, 80), 0.15)
}

func TestRankExplainsAndKeepsTheOrderOnTies(t *testing.T) {
	m := scoredModel(0)
	a, b := &Provider{Name: "a", Price: Price{"default": 1}}, &Provider{Name: "b", Price: Price{"default": 1}}
	ranked, route := m.Rank([]*Provider{b, a}, "hcaptcha", nil, time.Minute, "x", nil)
	assert.Equal(t, []*Provider{b, a}, ranked, "a tie keeps the task's order")
	assert.Equal(t, captchaflow.RouteCheapest, route.Reason)
	assert.Equal(t, captchaflow.RouteCandidate{Provider: "b", CostUSD: 0.001074114, P90Seconds: 30, GoodShare: 0.95 * 0.98, Fits: true},
		roundCandidate(route.Candidates[0]))
	ranked, _ = m.Rank([]*Provider{b, a}, "hcaptcha", []string{"b"}, time.Minute, "x", nil)
	assert.Equal(t, "a", ranked[0].Name, "avoided go last")
	_, route = m.Rank([]*Provider{a}, "hcaptcha", nil, 10*time.Second, "x", nil)
	assert.Equal(t, captchaflow.RouteFastest, route.Reason, "the prior's 30 s does not fit 10 s")
	explored := 0
	for i := range 1000 {
		if _, route := scoredModel(0.1).Rank([]*Provider{a, b}, "hcaptcha", nil, time.Minute, fmt.Sprint(i), nil); route.Reason == captchaflow.RouteExplore {
			explored++
		}
	}
	assert.InDelta(t, 100, explored, 30, "explore_share of the seeds")
}

func roundCandidate(c captchaflow.RouteCandidate) captchaflow.RouteCandidate {
	c.GoodShare = math.Round(c.GoodShare*1e6) / 1e6
	return c
}

// What one worker learns reaches another through Drain and Apply: a provider that broke, then its probe's solve.
func TestDrainAndApplyShareWhatOneWorkerLearned(t *testing.T) {
	clock := time.Unix(1e9, 0)
	one, other := scoredModel(0), scoredModel(0)
	one.now, other.now = func() time.Time { return clock }, func() time.Time { return clock }
	cheap, dear := &Provider{Name: "cheap", Price: Price{"default": 1}}, &Provider{Name: "dear", Price: Price{"default": 2}}
	first := func(m *Model) string {
		ranked, _ := m.Rank([]*Provider{cheap, dear}, "hcaptcha", nil, time.Minute, "x", nil)
		return ranked[0].Name
	}
	for range 6 {
		one.Learn(Obs{Provider: "cheap", Method: "hcaptcha", Seconds: 0, Outcome: ObservedUnsolvable})
	}
	one.Learn(Obs{Provider: "dear", Method: "hcaptcha", Seconds: 10, Outcome: ObservedSolved})
	one.Verdict("dear", "hcaptcha", true) // a good verdict says nothing new: not shared
	shared := one.Drain()
	require.Len(t, shared, 7)
	assert.Empty(t, one.Drain(), "drained once")
	other.Apply(shared)
	assert.Empty(t, other.Drain(), "what it applied is not its own to share")
	assert.Equal(t, "dear", first(one))
	assert.Equal(t, "dear", first(other), "learned from the other worker's observations alone")

	clock = clock.Add(time.Minute) // nothing heard of cheap for longer than its p90: the next task probes it
	assert.Equal(t, "cheap", first(one))
	assert.Equal(t, "dear", first(one), "one probe at a time")
	one.Learn(Obs{Provider: "cheap", Method: "hcaptcha", Seconds: 8, Outcome: ObservedSolved})
	assert.Equal(t, "cheap", first(one), "the probe solved: cheap recovered")
	shared = one.Drain()
	require.Len(t, shared, 1)
	assert.True(t, shared[0].Reset)
	other.Apply(shared)
	assert.Equal(t, "cheap", first(other), "and the other worker knows at once, without a probe of its own")

	for range sharedKept + 10 {
		one.Learn(Obs{Provider: "dear", Method: "hcaptcha", Seconds: 10, Outcome: ObservedSolved})
	}
	assert.Len(t, one.Drain(), sharedKept, "bounded: the latest kept")
	assert.Empty(t, NewModel(File{}).Drain(), "routing: order shares nothing")
}

// A solve time below zero (a code received by a worker whose clock runs behind the workflow's) is learned as 0 s,
// by Learn and from other workers' observations alike: never a p90 or a first poll's hold below zero.
func TestNegativeSolveTimesAreLearnedAsZero(t *testing.T) {
	own, other := scoredModel(0), scoredModel(0)
	p := &Provider{Name: "skewed", Price: Price{"default": 1}}
	for range 20 {
		own.Learn(Obs{Provider: "skewed", Method: "hcaptcha", Seconds: -40, Outcome: ObservedSolved})
		other.Apply([]Obs{{Provider: "skewed", Method: "hcaptcha", Seconds: -40, Outcome: ObservedSolved}})
	}
	for _, m := range []*Model{own, other} {
		_, route := m.Rank([]*Provider{p}, "hcaptcha", nil, time.Minute, "x", nil)
		assert.Equal(t, 0.0, route.Candidates[0].P90Seconds)
		assert.Equal(t, time.Duration(0), m.FirstPoll("skewed", "hcaptcha"))
	}
}

// A ranking without a seed (a pinned submission's: its provider was chosen where it was pinned) chooses nothing: it
// spends no probe, so the next ranking that chooses still probes the recovered provider, and says so.
func TestRankingWithoutSeedSpendsNoProbe(t *testing.T) {
	clock := time.Unix(1e9, 0)
	m := scoredModel(0)
	m.now = func() time.Time { return clock }
	cheap, dear := &Provider{Name: "cheap", Price: Price{"default": 1}}, &Provider{Name: "dear", Price: Price{"default": 2}}
	for range 6 {
		m.Learn(Obs{Provider: "cheap", Method: "hcaptcha", Seconds: 0, Outcome: ObservedUnsolvable})
	}
	m.Learn(Obs{Provider: "dear", Method: "hcaptcha", Seconds: 10, Outcome: ObservedSolved})
	clock = clock.Add(time.Minute)
	ranked, route := m.Rank([]*Provider{cheap, dear}, "hcaptcha", nil, time.Minute, "", nil)
	assert.Equal(t, "dear", ranked[0].Name, "no seed: no probe")
	assert.Equal(t, captchaflow.RouteCheapest, route.Reason)
	ranked, route = m.Rank([]*Provider{cheap, dear}, "hcaptcha", nil, time.Minute, "x", nil)
	assert.Equal(t, "cheap", ranked[0].Name, "the probe was not spent")
	assert.Equal(t, captchaflow.RouteProbe, route.Reason)
}
