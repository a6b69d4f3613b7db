package providers

import (
	"errors"
	"maps"
	"net/http"
	"sync"
	"time"

	"github.com/captchaflow/captchaflow/providers/callback"
)

// Outcome is what one provider request says about its provider; one that opens a circuit is MetricCircuitOpened's reason.
type Outcome string

const (
	OutcomeOK          Outcome = "ok"           // an answer that says the provider works (a task taken, a result, not ready)
	OutcomeUnreachable Outcome = "unreachable"  // no answer (network) or a 5xx, after the client's own timeout
	OutcomeZeroBalance Outcome = "zero_balance" // ERROR_ZERO_BALANCE
	OutcomeNoSlot      Outcome = "no_slot"      // ERROR_NO_SLOT_AVAILABLE
	OutcomeKeyRefused  Outcome = "key_refused"  // the key or the worker's IP refused
	OutcomeOther       Outcome = "other"        // any other answer: says nothing about the provider's health
)

// Circuit states, as the MetricCircuitState gauge shows them.
const StateClosed, StateHalfOpen, StateOpen = 0, 1, 2

// The documented circuit bounds (docs/operations.md).
const (
	openAfter      = 3                // unreachable answers in a row that open the circuit
	openBase       = 30 * time.Second // an unreachable run's staleness, and how long it and no-slot open the circuit
	maxOpenFor     = 5 * time.Minute  // an unreachable circuit's time doubles up to it while its one probe fails
	zeroBalanceFor = time.Minute
	keyRefusedFor  = 10 * time.Minute
	UnsupportedFor = 10 * time.Minute // a provider that refused a task type is not asked for it again (its plan may change)
	probeTimeout   = time.Minute      // a half-open probe not reported back within it lets another through
)

// CircuitSettings are the worker's PROVIDER_* bounds on circuits.
type CircuitSettings struct {
	NoSlotBudget time.Duration // no-slot answers without a break this long: skipped for openBase
	GiveUp       time.Duration // unreachable this long: its open submissions are given up
}

var DefaultCircuitSettings = CircuitSettings{NoSlotBudget: 60 * time.Second, GiveUp: 2 * time.Minute}

// Breaker holds the worker's circuit of each provider; only activities read it. A nil Breaker is always closed.
type Breaker struct {
	cfg   CircuitSettings
	now   func() time.Time
	mu    sync.Mutex
	state map[string]*circuit
	lacks map[[2]string]time.Time // provider, task type: refused until then (a circuit's reset does not forget it)
}

type circuit struct {
	openUntil, probeAt time.Time // openUntil zero: closed; probeAt: a half-open probe is out since then
	openFor            time.Duration
	reason, run        Outcome // run: the latest answers' kind, count of them in a row, the first's and the latest's time
	count              int
	since, last        time.Time
}

func NewBreaker(cfg CircuitSettings, now func() time.Time) *Breaker {
	return &Breaker{cfg: cfg, now: now, state: map[string]*circuit{}, lacks: map[[2]string]time.Time{}}
}

// Refused marks name as lacking the task type of method and params for UnsupportedFor; Lacks tells whether it does.
func (b *Breaker) Refused(name, method string, params map[string]string) {
	b.with(name, func(_ *circuit, now time.Time) {
		maps.DeleteFunc(b.lacks, func(_ [2]string, until time.Time) bool { return !now.Before(until) }) // bounded by its TTL
		b.lacks[[2]string{name, taskType(method, params)}] = now.Add(UnsupportedFor)
	})
}

func (b *Breaker) Lacks(name, method string, params map[string]string) (lacks bool) {
	b.with(name, func(_ *circuit, now time.Time) {
		lacks = now.Before(b.lacks[[2]string{name, taskType(method, params)}])
	})
	return lacks
}

// taskType is what a provider lacks: the createTask kind of method and params (reCAPTCHA v2 or v3 …), else the
// method; proxied apart, so a refused proxied type bars no proxyless task of the kind.
func taskType(method string, params map[string]string) string {
	typ := method
	if kind, err := KindOf(method, params); err == nil {
		typ = string(kind)
	}
	if params["proxy"] != "" {
		typ += "+proxy"
	}
	return typ
}

// with runs f on name's circuit under the lock; a nil Breaker runs nothing.
func (b *Breaker) with(name string, f func(c *circuit, now time.Time)) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state[name] == nil {
		b.state[name] = &circuit{}
	}
	f(b.state[name], b.now())
}

// Allow tells whether a request may go to name now, else when to ask again; a half-open circuit lets one probe through.
func (b *Breaker) Allow(name string) (ok bool, retryAt time.Time, reason string) {
	return b.allow(name, true)
}

// Allows tells whether Allow would let a request through now, taking no half-open probe (exploring asks it).
func (b *Breaker) Allows(name string) bool {
	ok, _, _ := b.allow(name, false)
	return ok
}

func (b *Breaker) allow(name string, probe bool) (ok bool, retryAt time.Time, reason string) {
	ok = true
	b.with(name, func(c *circuit, now time.Time) {
		switch {
		case c.openUntil.IsZero():
		case now.Before(c.openUntil):
			ok, retryAt, reason = false, c.openUntil, string(c.reason)
		case !c.probeAt.IsZero() && now.Sub(c.probeAt) < probeTimeout:
			ok, retryAt, reason = false, c.probeAt.Add(probeTimeout), string(c.reason)
		case probe:
			c.probeAt = now
		}
	})
	return ok, retryAt, reason
}

// Record feeds one request's outcome to name's circuit; opened is the reason when it just opened.
func (b *Breaker) Record(name string, o Outcome) (opened string) {
	b.with(name, func(c *circuit, now time.Time) {
		wasOpen, d := !c.openUntil.IsZero(), time.Duration(0)
		if c.run != o || o == OutcomeUnreachable && !c.down(now) { // a stale unreachable run ends
			c.run, c.count, c.since = o, 0, now
		}
		c.count, c.last, c.probeAt = c.count+1, now, time.Time{}
		switch {
		case o == OutcomeOK || o == OutcomeOther: // it answered: whatever it said, it is up
			*c = circuit{}
		case o == OutcomeZeroBalance:
			d = zeroBalanceFor
		case o == OutcomeKeyRefused:
			d = keyRefusedFor
		case o == OutcomeNoSlot && now.Sub(c.since) >= b.cfg.NoSlotBudget, o == OutcomeUnreachable && !wasOpen && c.count >= openAfter:
			d = openBase
		case o == OutcomeUnreachable && wasOpen && !now.Before(c.openUntil): // a failed probe: open again, for longer
			d = min(max(2*c.openFor, openBase), maxOpenFor)
		} // while open, an unreachable answer to a request sent anyway (a poll) changes nothing
		if d > 0 {
			c.openUntil, c.openFor, c.reason = now.Add(d), d, o
		}
		if d > 0 && !wasOpen {
			opened = string(o)
		}
	})
	return opened
}

// RecordPoll: a result request's answer proves reachability only, so it closes only an unreachable circuit and run.
func (b *Breaker) RecordPoll(name string, o Outcome) (opened string) {
	if o == OutcomeUnreachable {
		return b.Record(name, o)
	}
	b.with(name, func(c *circuit, _ time.Time) {
		if c.reason == OutcomeUnreachable {
			c.openUntil, c.openFor, c.reason, c.probeAt = time.Time{}, 0, "", time.Time{}
		}
		if c.run == OutcomeUnreachable {
			c.run = ""
		}
	})
	return ""
}

// down tells whether a run of unreachable answers is going on: its latest came within openBase.
func (c *circuit) down(now time.Time) bool {
	return c.run == OutcomeUnreachable && now.Sub(c.last) <= openBase
}

// DownFor is name's run of unreachable answers, first to latest (0: none): silence is no evidence.
func (b *Breaker) DownFor(name string) (d time.Duration) {
	b.with(name, func(c *circuit, now time.Time) {
		if c.down(now) {
			d = c.last.Sub(c.since)
		}
	})
	return d
}

// GivenUp tells whether name's requests have failed for the give-up bound: its open submissions are abandoned.
func (b *Breaker) GivenUp(name string) bool {
	return b != nil && b.cfg.GiveUp > 0 && b.DownFor(name) >= b.cfg.GiveUp
}

func (b *Breaker) State(name string) (state int) {
	b.with(name, func(c *circuit, now time.Time) {
		switch {
		case now.Before(c.openUntil):
			state = StateOpen
		case !c.openUntil.IsZero():
			state = StateHalfOpen
		}
	})
	return state
}

// IsOpen: open now, not half-open (unlike Allow, it takes no probe).
func (b *Breaker) IsOpen(name string) bool { return b.State(name) == StateOpen }

func (b *Breaker) Settings() CircuitSettings {
	if b == nil {
		return CircuitSettings{}
	}
	return b.cfg
}

// keyCodes are the answers that mean the key (or the worker's address) is refused: nothing sent with it can work.
var keyCodes = map[string]bool{"ERROR_WRONG_USER_KEY": true, "ERROR_KEY_DOES_NOT_EXIST": true, "ERROR_IP_NOT_ALLOWED": true,
	"ERROR_IP_BLOCKED": true, "ERROR_ACCOUNT_SUSPENDED": true, "ERROR_KEY_DENIED_ACCESS": true}

// OutcomeOf is what a provider request that ended with err says about the provider.
func OutcomeOf(err error) Outcome {
	switch pe, ok := errors.AsType[*Error](err); {
	case err == nil:
		return OutcomeOK
	case IsTransportError(err):
		return OutcomeUnreachable
	case !ok:
		return OutcomeOther
	case pe.Code == callback.CodeZeroBalance:
		return OutcomeZeroBalance
	case pe.Code == callback.CodeNoSlot:
		return OutcomeNoSlot
	case keyCodes[pe.Code], pe.HTTPStatus == http.StatusUnauthorized, pe.HTTPStatus == http.StatusForbidden:
		return OutcomeKeyRefused
	case pe.Code == "" && pe.HTTPStatus >= 500:
		return OutcomeUnreachable
	}
	return OutcomeOther
}
