package providers

// Scored routing (docs/behaviour.md "Scored routing"): what this worker learned of each provider and method, and
// the ranking of a submission's candidates by the expected cost of a good code among those that fit its time.

import (
	"cmp"
	"hash/fnv"
	"math"
	"slices"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/captchaflow/captchaflow"
)

// Price is USD per 1 000 solves by in.php method, "default" for the rest; one number is the default.
type Price map[string]float64

func (p *Price) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		var one float64
		err := n.Decode(&one)
		*p = Price{"default": one}
		return err
	}
	return n.Decode((*map[string]float64)(p))
}

// Of is one solve of method's price in USD (0: none stated).
func (p Price) Of(method string) float64 {
	if v, ok := p[method]; ok {
		return v / 1000
	}
	return p["default"] / 1000
}

// Routing policies: the file's order (default), or scored.
const RoutingOrder, RoutingScored = "order", "scored"

// The model's priors and bounds (docs/behaviour.md).
const (
	DefaultExploreShare  = 0.05
	DefaultMemory        = 5  // observations: each weighs 1-1/memory less with every newer one
	DefaultPriorSolve    = 30 // seconds: one pseudo-solve a provider starts with
	priorUnsolvable      = 0.05
	priorBad             = 0.02
	minGoodShare         = 0.5 // below it a provider does not fit: most of its submissions fail
	timesKept            = 32  // solve times kept per provider and method
	minProbeGap          = 5 * time.Second
	sharedKept           = 512 // observations kept for the fleet until drained
	minTimesForFirstPoll = 4   // fewer solves say too little of a provider's pace to hold a poll back
)

// Outcomes of an observed submission, and a caller's bad verdict.
const ObservedSolved, ObservedUnsolvable, ObservedOpen, ObservedBad = "solved", "unsolvable", "open", "bad"

// Obs is one observation as the workers of a task queue share it.
type Obs struct {
	Provider string  `json:"p"`
	Method   string  `json:"m"`
	Seconds  float64 `json:"s,omitempty"`
	Outcome  string  `json:"o"`           // Observed*
	Reset    bool    `json:"r,omitempty"` // a probe's solve: the provider recovered, its older shares are dropped
}

// Model is one worker's routing knowledge; nil routes in order and learns nothing.
type Model struct {
	Policy                string
	explore, decay, prior float64
	now                   func() time.Time
	mu                    sync.Mutex
	stats                 map[[2]string]*stats // by provider and method
	shared                []Obs                // this worker's own, not drained yet
}

type stats struct {
	times                    []solveTime // the latest timesKept, oldest first
	seen, unsolvable, solved float64     // decayed counts of ended submissions
	bad                      float64     // decayed count of bad verdicts
	price, cost, p90, good   float64     // the latest score, for the metrics
	at, probed               time.Time   // the latest ended or open submission learned, and probe sent
}

type solveTime struct {
	secs float64
	open bool // censored: still open after secs
}

// NewModel is the model of a file's routing settings (validated by ParseFile).
func NewModel(f File) *Model {
	return &Model{Policy: cmp.Or(f.Routing, RoutingOrder), explore: *cmp.Or(f.ExploreShare, new(float64(DefaultExploreShare))),
		decay: 1 - 1/float64(cmp.Or(f.Memory, DefaultMemory)), prior: float64(cmp.Or(f.PriorSolveSeconds, DefaultPriorSolve)),
		now: time.Now, stats: map[[2]string]*stats{}}
}

// SetClock makes m read the time from now (a fleet's models on one test clock).
func (m *Model) SetClock(now func() time.Time) { m.now = now }

func (m *Model) Scored() bool { return m != nil && m.Policy == RoutingScored }

// with runs f on provider and method's stats under the lock; a nil Model runs nothing.
func (m *Model) with(provider, method string, f func(s *stats)) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{provider, method}
	if m.stats[k] == nil {
		m.stats[k] = &stats{}
	}
	f(m.stats[k])
}

// Learn learns one of this worker's observations; Reset: a probe's submission (its route said RouteProbe).
func (m *Model) Learn(o Obs) { m.learn(o, true) }

// Verdict learns a caller's verdict on a code provider solved; only a bad one changes a share.
func (m *Model) Verdict(provider, method string, good bool) {
	if !good {
		m.learn(Obs{Provider: provider, Method: method, Outcome: ObservedBad}, true)
	}
}

// Drain takes this worker's observations since the last Drain (at most the latest sharedKept), to share them.
func (m *Model) Drain() (own []Obs) {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	own, m.shared = m.shared, nil
	return own
}

// Apply learns other workers' observations as if this worker had made them.
func (m *Model) Apply(obs []Obs) {
	for _, o := range obs {
		m.learn(o, false)
	}
}

func (m *Model) learn(o Obs, own bool) {
	o.Seconds = max(0, o.Seconds) // below 0: a worker's clock behind the workflow's, not a solve quicker than none
	m.with(o.Provider, o.Method, func(s *stats) {
		if o.Outcome == ObservedSolved || o.Outcome == ObservedOpen { // an unsolvable answer says nothing of the solve time
			s.times = append(s.times[max(0, len(s.times)+1-timesKept):], solveTime{o.Seconds, o.Outcome == ObservedOpen})
		}
		switch o.Outcome {
		case ObservedBad:
			s.bad++
		case ObservedSolved, ObservedUnsolvable:
			// A probe's solve closes it, as a half-open circuit's: its route says so wherever it is learned, and the
			// first answer since this worker sent one is taken for it (a submission whose route was not kept).
			if o.Reset = o.Outcome == ObservedSolved && (o.Reset || own && s.probed.After(s.at)); o.Reset {
				s.seen, s.unsolvable, s.solved = 0, 0, 0
			}
			won := float64(btoi(o.Outcome == ObservedSolved)) // the submission counts once in seen, once in its outcome
			s.seen, s.unsolvable, s.solved, s.bad = s.seen*m.decay+1, s.unsolvable*m.decay+(1-won), s.solved*m.decay+won, s.bad*m.decay
		}
		if o.Outcome != ObservedBad {
			s.at = m.now()
		}
		if own && m.Scored() {
			m.shared = append(m.shared[max(0, len(m.shared)+1-sharedKept):], o)
		}
	})
}

// candidate is one provider's score for a submission.
type candidate struct {
	*Provider
	captchaflow.RouteCandidate
	avoided int // 1 + its place in the avoid list (0: not avoided): the latest avoided goes last
}

// Rank orders cands (in preference order) best first: those that fit left by expected cost, then the rest by time, the
// avoided last (the latest last of all). A share of seeds explores another that fits and b lets through, and a recovered
// one is probed; not without a seed (a pinned submission's ranking chooses nothing): no probe is spent where none is sent.
func (m *Model) Rank(cands []*Provider, method string, avoid []string, left time.Duration, seed string, b *Breaker) ([]*Provider, *captchaflow.Route) {
	scored := make([]candidate, len(cands))
	for i, p := range cands {
		scored[i] = candidate{Provider: p, RouteCandidate: m.score(p, method, left), avoided: slices.Index(avoid, p.Name) + 1}
	}
	slices.SortStableFunc(scored, func(a, b candidate) int {
		if c := cmp.Or(cmp.Compare(a.avoided, b.avoided), cmp.Compare(btoi(!a.Fits), btoi(!b.Fits))); c != 0 || !a.Fits {
			return cmp.Or(c, cmp.Compare(a.P90Seconds/a.GoodShare, b.P90Seconds/b.GoodShare))
		}
		return cmp.Compare(a.CostUSD, b.CostUSD)
	})
	route := &captchaflow.Route{Reason: captchaflow.RouteCheapest}
	if !scored[0].Fits {
		route.Reason = captchaflow.RouteFastest
	}
	var others []int // where exploring may go: not avoided, in time, and not one Submit would skip
	pick, reason := -1, captchaflow.RouteProbe
	for i, c := range scored[1:] {
		if seed != "" && c.avoided == 0 && (left <= 0 || c.P90Seconds < left.Seconds()) && b.Allows(c.Name) {
			others = append(others, i+1)
			if pick < 0 && scored[0].avoided == 0 && m.probe(c.Provider, method, scored[0].CostUSD) {
				pick = i + 1
			}
		}
	}
	h := fnv.New64a()
	h.Write([]byte(seed))
	if u := float64(h.Sum64()%1_000_000) / 1_000_000; pick < 0 && u < m.explore && len(others) > 0 && scored[0].avoided == 0 {
		pick, reason = others[int(u/m.explore*float64(len(others)))], captchaflow.RouteExplore // u/explore is uniform in [0, 1)
	}
	if pick > 0 { // the rest keep their order: if it refuses, the best comes next
		scored = slices.Concat(scored[pick:pick+1], scored[:pick], scored[pick+1:])
		route.Reason = reason
	}
	out := make([]*Provider, len(scored))
	for i, c := range scored {
		out[i], route.Candidates = c.Provider, append(route.Candidates, c.RouteCandidate)
	}
	return out, route
}

// probe tells whether p would cost less than best if it solved again (a probe shows that, not its codes' worth) and was
// unheard of for its p90 (at least minProbeGap): then it is probed, once per such gap (a half-open circuit's one probe).
func (m *Model) probe(p *Provider, method string, best float64) (probe bool) {
	m.with(p.Name, method, func(s *stats) {
		_, bad := s.shares()
		solving := s.price * (1 - priorUnsolvable*float64(btoi(p.Refunds))) / ((1 - priorUnsolvable) * (1 - bad))
		gap := max(minProbeGap, time.Duration(s.p90*float64(time.Second)))
		if now := m.now(); round(solving) < best && now.Sub(s.at) >= gap && now.Sub(s.probed) >= gap {
			s.probed, probe = now, true
		}
	})
	return probe
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// score is p's expected cost of a good code for method and its p90 solve time; it fits when both are good enough.
func (m *Model) score(p *Provider, method string, left time.Duration) (c captchaflow.RouteCandidate) {
	m.with(p.Name, method, func(s *stats) {
		unsolvable, bad := s.shares()
		s.price, s.good, s.p90 = p.Price.Of(method), max((1-unsolvable)*(1-bad), 1e-3), p90(s.times, m.prior)
		s.cost = s.price * (1 - unsolvable*float64(btoi(p.Refunds))) / s.good // a refunded unsolvable answer costs nothing
		c = captchaflow.RouteCandidate{Provider: p.Name, CostUSD: round(s.cost), P90Seconds: round(s.p90), GoodShare: round(s.good),
			Fits: s.good >= minGoodShare && (left <= 0 || s.p90 < left.Seconds())}
	})
	return c
}

// shares are the unsolvable share of ended submissions and the bad share of solved ones; each prior weighs one.
func (s *stats) shares() (unsolvable, bad float64) {
	return (s.unsolvable + priorUnsolvable) / (s.seen + 1), min(1, (s.bad+priorBad)/(s.solved+1))
}

// p90 is the Kaplan–Meier 90th percentile of the solve times, the prior one pseudo-solve; when more than a tenth
// was still open past every solve, it lies beyond what was seen: twice the longest wait, a guess that fits less.
func p90(times []solveTime, prior float64) float64 {
	all := slices.SortedStableFunc(slices.Values(append([]solveTime{{secs: prior}}, times...)), func(a, b solveTime) int {
		return cmp.Or(cmp.Compare(a.secs, b.secs), cmp.Compare(btoi(a.open), btoi(b.open)))
	})
	survive := 1.0
	for i, t := range all {
		if !t.open {
			survive *= 1 - 1/float64(len(all)-i)
		}
		if survive <= 0.1+1e-9 {
			return t.secs
		}
	}
	return 2 * all[len(all)-1].secs
}

func round(x float64) float64 { return math.Round(x*1e9) / 1e9 }

// Row is one provider and method's latest score, for the metrics.
type Row struct {
	Provider, Method                  string
	Price, Cost, P90, Unsolvable, Bad float64
}

func (m *Model) Snapshot() (rows []Row) {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, s := range m.stats {
		u, b := s.shares()
		rows = append(rows, Row{Provider: k[0], Method: k[1], Price: s.price, Cost: s.cost, P90: s.p90, Unsolvable: u, Bad: b})
	}
	return rows
}

// FirstPoll is how long after submission a task's first poll is worth making, so none is spent on a task hardly begun:
// half the lower quartile of provider's latest solve times of method (0 under minTimesForFirstPoll solves). Half: a solve a
// poll finds is learned no sooner than the poll, so a hold at the quartile would only ever grow while callbacks are down.
func (m *Model) FirstPoll(provider, method string) (d time.Duration) {
	m.with(provider, method, func(s *stats) {
		var solved []float64
		for _, t := range s.times {
			if !t.open {
				solved = append(solved, t.secs)
			}
		}
		if len(solved) >= minTimesForFirstPoll {
			slices.Sort(solved)
			d = time.Duration(solved[len(solved)/4] * float64(time.Second) / 2)
		}
	})
	return d
}
