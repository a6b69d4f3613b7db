// Package sim is an in-process simulator of a CaptchaAI / 2captcha-style
// provider (in.php / res.php with pingbacks) with deterministic fault
// injection and provider-side counters, so the whole stack can be exercised
// without the real service.
package sim

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/captchaflow/captchaflow/providers"
)

// Simulator is a provider simulator. It is safe for concurrent use.
type Simulator struct {
	cfg     Config
	profile providers.Profile // the createTask flavor imitated (Config.Protocol createtask); zero on in.php
	log     *slog.Logger
	keys    map[string]struct{}
	client  *http.Client
	sem     chan struct{} // bounds pingback requests in flight
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup // running timer callbacks and deliveries
	handler http.Handler

	mu     sync.Mutex
	closed bool
	// gen changes on Reset so work started before it cannot touch new state.
	gen            uint64
	nextID         int64
	tasks          map[int64]*task
	threads        threadState    // the thread cap and the tasks in solving per key
	limits         limitState     // the account limits and their per-key state
	failSubmitSeen map[string]int // fail_submit rejections, per pingback URL
	unsolvableSeen map[string]int // unsolvable=N submissions, per pingback URL
	answerSeen     map[string]int // submit_lost / submit_stall_ms answers, per pingback URL (nil until used)
	rules          []FaultRule
	compiledRules  []compiledRule
	stats          counters
	reportStall    ReportStall // guarded by mu; see PUT /_sim/report_stall
	balance        float64     // what getbalance answers; in.php answers ERROR_ZERO_BALANCE while it is <= 0
}

type counters struct {
	accepted            int64
	rejected            int64
	answersLost         int64
	answersStalled      int64
	answersGatewayError int64
	rejectedByCode      map[string]int64
	resCalls            map[string]int64
	pingbacks           PingbackStats
	reports             ReportStats
}

func newCounters() counters {
	return counters{rejectedByCode: map[string]int64{}, resCalls: map[string]int64{}}
}

// task is the mutable record behind Task; guarded by Simulator.mu.
type task struct {
	gen          uint64
	id           int64
	idStr        string
	key          string
	method       string
	taskType     string         // createTask's task type, "" on in.php
	kind         providers.Kind // createTask only
	pingbackURL  string
	redactedURL  string
	pingbackPath string
	submittedAt  time.Time
	solveTime    time.Duration
	plan         pingbackPlan
	status       TaskStatus
	solvedAt     time.Time
	attempts     []PingbackAttempt
	resGets      int64
	reportsGood  int64
	reportsBad   int64
	reports      []ReportRecord
	timers       []*time.Timer
	proxy        *ProxyGot
	userAgent    string
}

// failWord is what t answers once found unsolvable: ERROR_CAPTCHA_UNSOLVABLE, or its bad proxy's word.
func (t *task) failWord() string { return cmp.Or(t.plan.failWord, ErrorCaptchaUnsolvable) }

// New validates cfg and returns a running simulator. Call Close when done.
func New(cfg Config) (*Simulator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("sim: invalid config: %w", err)
	}
	rules, _ := ParseFaultRules(cfg.FaultRules) // validated above
	compiled, _ := compileRules(rules)
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	keys := make(map[string]struct{}, len(cfg.APIKeys))
	for _, k := range cfg.APIKeys {
		keys[k] = struct{}{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	profile, _ := providers.ProfileOf(providers.Flavor(cfg.Flavor)) // validated above
	s := &Simulator{
		cfg:     cfg,
		profile: profile,
		log:     log,
		keys:    keys,
		client: &http.Client{
			Timeout: cfg.PingbackTimeout,
			Transport: &http.Transport{
				Proxy:               nil, // pingbacks go straight to the target
				MaxIdleConns:        cfg.PingbackConcurrency,
				MaxIdleConnsPerHost: cfg.PingbackConcurrency,
				IdleConnTimeout:     30 * time.Second,
			},
			// A provider does not follow redirects with the result.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		sem:            make(chan struct{}, cfg.PingbackConcurrency),
		ctx:            ctx,
		cancel:         cancel,
		nextID:         cfg.TaskIDBase,
		tasks:          map[int64]*task{},
		threads:        newThreadState(cfg.Threads),
		limits:         newLimitState(cfg),
		balance:        cfg.Balance,
		failSubmitSeen: map[string]int{},
		unsolvableSeen: map[string]int{},
		rules:          rules,
		compiledRules:  compiled,
		stats:          newCounters(),
	}
	s.handler = s.routes()
	return s, nil
}

// Handler serves in.php, res.php, /_sim/* and /healthz.
func (s *Simulator) Handler() http.Handler { return s.handler }

// Close stops all timers, aborts in-flight pingbacks and waits (at most
// CloseTimeout) for them to finish. It is safe to call more than once.
func (s *Simulator) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	for _, t := range s.tasks {
		stopTimers(t)
	}
	s.mu.Unlock()
	s.cancel()

	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(s.cfg.CloseTimeout):
		s.log.Warn("simulator close timed out waiting for pingback deliveries", "timeout", s.cfg.CloseTimeout)
	}
	s.client.CloseIdleConnections()
}

// Reset forgets all tasks, per-URL fault counts and counters. Task ids keep
// increasing so a stale client can never read another task's result.
func (s *Simulator) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.tasks {
		stopTimers(t)
	}
	s.gen++
	s.tasks = map[int64]*task{}
	s.threads.reset()
	s.limits.reset()
	s.failSubmitSeen = map[string]int{}
	s.unsolvableSeen = map[string]int{}
	s.answerSeen = nil
	s.stats = newCounters()
	s.reportStall = ReportStall{}
}

// SetFaultRules replaces the fault rules (initially from Config.FaultRules).
func (s *Simulator) SetFaultRules(rules []FaultRule) error {
	compiled, err := compileRules(rules)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = slices.Clone(rules)
	s.compiledRules = compiled
	return nil
}

// FaultRules returns the active fault rules.
func (s *Simulator) FaultRules() []FaultRule {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.rules)
}

// Stats returns a snapshot of the counters.
func (s *Simulator) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	byStatus := map[TaskStatus]int64{}
	for _, t := range s.tasks {
		byStatus[s.statusAt(t, now)]++
	}
	return Stats{
		Submissions: SubmissionStats{
			Accepted:            s.stats.accepted,
			Rejected:            s.stats.rejected,
			AnswersLost:         s.stats.answersLost,
			AnswersStalled:      s.stats.answersStalled,
			AnswersGatewayError: s.stats.answersGatewayError,
			RejectedByCode:      maps.Clone(s.stats.rejectedByCode),
		},
		ResCalls:  maps.Clone(s.stats.resCalls),
		Pingbacks: s.stats.pingbacks,
		Reports:   s.stats.reports,
		Threads:   s.threads.stats(),
		Limits:    s.limits.snapshot(),
		Tasks:     byStatus,
	}
}

// Tasks returns a snapshot of every known task, ordered by id.
func (s *Simulator) Tasks() []Task {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := slices.Sorted(maps.Keys(s.tasks))
	now := time.Now()
	out := make([]Task, 0, len(ids))
	for _, id := range ids {
		out = append(out, s.snapshot(s.tasks[id], now))
	}
	return out
}

// statusAt is the externally visible status, including expiry. Caller holds mu.
func (s *Simulator) statusAt(t *task, now time.Time) TaskStatus {
	if t.status != StatusSolving && now.After(t.solvedAt.Add(s.cfg.Retention)) {
		return StatusExpired
	}
	return t.status
}

func (s *Simulator) snapshot(t *task, now time.Time) Task {
	out := Task{
		ID:           t.idStr,
		Method:       t.method,
		TaskType:     t.taskType,
		Status:       s.statusAt(t, now),
		PingbackURL:  t.redactedURL,
		PingbackPath: t.pingbackPath,
		Faults:       t.plan.names(),
		SubmittedAt:  t.submittedAt,
		SolveTimeMS:  t.solveTime.Milliseconds(),
		Pingbacks:    slices.Clone(t.attempts),
		ResGetCount:  t.resGets,
		ReportsGood:  t.reportsGood,
		ReportsBad:   t.reportsBad,
		Reports:      slices.Clone(t.reports),
		Proxy:        t.proxy,
		UserAgent:    t.userAgent,
	}
	if out.Pingbacks == nil {
		out.Pingbacks = []PingbackAttempt{}
	}
	if t.status != StatusSolving {
		solved := t.solvedAt
		expires := t.solvedAt.Add(s.cfg.Retention)
		out.SolvedAt, out.ExpiresAt = &solved, &expires
	}
	if !t.plan.unsolvable {
		out.Code = t.code()
	}
	return out
}

// lookup finds a task owned by key. Caller holds mu.
func (s *Simulator) lookup(key, id string) *task {
	n, ok := s.parseID(id)
	if !ok {
		return nil
	}
	t := s.tasks[n]
	if t == nil || t.key != key {
		return nil
	}
	return t
}

// schedule runs fn after d as tracked work of t. Caller holds mu.
func (s *Simulator) schedule(t *task, d time.Duration, fn func()) {
	t.timers = append(t.timers, time.AfterFunc(d, func() {
		if !s.enter() {
			return
		}
		defer s.wg.Done()
		fn()
	}))
}

// enter registers a unit of background work unless the simulator is closed.
func (s *Simulator) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}

// current reports whether t still belongs to the live state. Caller holds mu.
func (s *Simulator) current(t *task) bool { return !s.closed && t.gen == s.gen }

// sleep waits for d or until the simulator closes; false means closed.
func (s *Simulator) sleep(d time.Duration) bool {
	if d <= 0 {
		return s.ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-s.ctx.Done():
		return false
	}
}

func stopTimers(t *task) {
	for _, tm := range t.timers {
		tm.Stop()
	}
	t.timers = nil
}
