package providers

import (
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/captchaflow/captchaflow/providers/callback"
)

// Outcome is what one provider request came to, as far as its circuit cares.
type Outcome int

const (
	OutcomeOK          Outcome = iota // an answer that says the provider works (a task taken, a result, not ready)
	OutcomeUnreachable                // no answer (network) or a 5xx, after the client's own timeout
	OutcomeZeroBalance                // ERROR_ZERO_BALANCE
	OutcomeNoSlot                     // ERROR_NO_SLOT_AVAILABLE
	OutcomeKeyRefused                 // the key or the worker's IP refused
	OutcomeOther                      // any other answer: says nothing about the provider's health
)

// Reasons a circuit opens (the reason label of MetricCircuitOpened).
const (
	ReasonUnreachable = "unreachable"
	ReasonZeroBalance = "zero_balance"
	ReasonNoSlot      = "no_slot"
	ReasonKeyRefused  = "key_refused"
)

// Circuit states, as the MetricCircuitState gauge shows them.
const (
	StateClosed   = 0
	StateHalfOpen = 1
	StateOpen     = 2
)

// CircuitSettings are the worker's bounds on circuits (PROVIDER_* variables, docs/operations.md).
type CircuitSettings struct {
	Failures int // unreachable answers in a row that open the circuit
	// OpenFor: an unreachable provider's circuit stays open this long before one probe, doubling while probes fail,
	// up to MaxOpenFor; a run of unreachable answers also ends OpenFor after its latest (stale evidence).
	OpenFor, MaxOpenFor           time.Duration
	ZeroBalanceFor, KeyRefusedFor time.Duration // how long those answers open it
	NoSlotBudget                  time.Duration // no-slot answers without a break this long: skipped for OpenFor
	GiveUp                        time.Duration // unreachable this long: its open submissions are given up
	ProbeTimeout                  time.Duration // a half-open probe not reported back within it lets another through
}

// DefaultCircuitSettings are the documented defaults.
var DefaultCircuitSettings = CircuitSettings{
	Failures: 3, OpenFor: 30 * time.Second, MaxOpenFor: 5 * time.Minute,
	ZeroBalanceFor: time.Minute, KeyRefusedFor: 10 * time.Minute,
	NoSlotBudget: 60 * time.Second, GiveUp: 2 * time.Minute, ProbeTimeout: time.Minute,
}

// Breaker holds one circuit per provider for every task of the worker; only activities read it (their results record it).
type Breaker struct {
	cfg   CircuitSettings
	now   func() time.Time
	mu    sync.Mutex
	state map[string]*circuit
}

type circuit struct {
	openUntil   time.Time // zero: closed
	openFor     time.Duration
	reason      string
	probeAt     time.Time // a half-open probe is out since then
	failures    int       // unreachable answers in a row (a run), each within OpenFor of the one before
	downSince   time.Time // the run's first
	lastDown    time.Time // the run's latest
	noSlotSince time.Time
}

// NewBreaker is a Breaker with every circuit closed.
func NewBreaker(cfg CircuitSettings, now func() time.Time) *Breaker {
	return &Breaker{cfg: cfg, now: now, state: map[string]*circuit{}}
}

func (b *Breaker) get(name string) *circuit {
	c := b.state[name]
	if c == nil {
		c = &circuit{}
		b.state[name] = c
	}
	return c
}

// Allow tells whether a request may go to name now, else when to ask again; an open circuit past its time lets one
// probe through (half-open) and others wait for its report.
func (b *Breaker) Allow(name string) (ok bool, retryAt time.Time, reason string) {
	if b == nil {
		return true, time.Time{}, ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	c, now := b.get(name), b.now()
	switch {
	case c.openUntil.IsZero():
		return true, time.Time{}, ""
	case now.Before(c.openUntil):
		return false, c.openUntil, c.reason
	case !c.probeAt.IsZero() && now.Sub(c.probeAt) < b.cfg.ProbeTimeout:
		return false, c.probeAt.Add(b.cfg.ProbeTimeout), c.reason
	}
	c.probeAt = now
	return true, time.Time{}, ""
}

// Record feeds one request's outcome to name's circuit; opened is the reason when it just opened.
func (b *Breaker) Record(name string, o Outcome) (opened string) {
	if b == nil {
		return ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	c, now := b.get(name), b.now()
	c.probeAt = time.Time{}
	if o != OutcomeUnreachable {
		c.failures = 0
	}
	if o != OutcomeNoSlot {
		c.noSlotSince = time.Time{}
	}
	switch o {
	case OutcomeOK, OutcomeOther: // it answered: whatever it said, it is up
		c.openUntil, c.openFor, c.reason = time.Time{}, 0, ""
	case OutcomeUnreachable:
		return b.unreachable(c, now)
	case OutcomeZeroBalance:
		return c.open(now, b.cfg.ZeroBalanceFor, ReasonZeroBalance)
	case OutcomeKeyRefused:
		return c.open(now, b.cfg.KeyRefusedFor, ReasonKeyRefused)
	case OutcomeNoSlot:
		if c.noSlotSince.IsZero() {
			c.noSlotSince = now
		}
		if now.Sub(c.noSlotSince) >= b.cfg.NoSlotBudget {
			return c.open(now, b.cfg.OpenFor, ReasonNoSlot)
		}
	}
	return ""
}

// RecordPoll feeds a result request's outcome: an answer proves reachability only (a provider out of money or slots
// still answers for its tasks), so it closes only an unreachable circuit.
func (b *Breaker) RecordPoll(name string, o Outcome) (opened string) {
	if b == nil {
		return ""
	}
	if o == OutcomeUnreachable {
		return b.Record(name, o)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.get(name)
	c.failures = 0
	if c.reason == ReasonUnreachable {
		c.openUntil, c.openFor, c.reason, c.probeAt = time.Time{}, 0, "", time.Time{}
	}
	return ""
}

func (b *Breaker) unreachable(c *circuit, now time.Time) string {
	if !c.down(now, b.cfg.OpenFor) { // no run, or a stale one: this answer starts a new run
		c.failures, c.downSince = 0, now
	}
	c.failures++
	c.lastDown = now
	if !c.openUntil.IsZero() && now.Before(c.openUntil) { // a request sent while open (a poll): changes nothing
		return ""
	}
	if !c.openUntil.IsZero() { // a failed probe: open again, for longer
		return c.open(now, min(max(2*c.openFor, b.cfg.OpenFor), b.cfg.MaxOpenFor), ReasonUnreachable)
	}
	if c.failures >= b.cfg.Failures {
		return c.open(now, b.cfg.OpenFor, ReasonUnreachable)
	}
	return ""
}

func (c *circuit) open(now time.Time, d time.Duration, reason string) string {
	wasOpen := !c.openUntil.IsZero()
	c.openUntil, c.openFor, c.reason = now.Add(d), d, reason
	if wasOpen {
		return ""
	}
	return reason
}

// down tells whether a run of unreachable answers is going on: its latest came within the last `within`.
func (c *circuit) down(now time.Time, within time.Duration) bool {
	return c.failures > 0 && now.Sub(c.lastDown) <= within
}

// DownFor is name's run of unreachable answers, first to latest (0: none): silence is no evidence.
func (b *Breaker) DownFor(name string) time.Duration {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.get(name)
	if !c.down(b.now(), b.cfg.OpenFor) {
		return 0
	}
	return c.lastDown.Sub(c.downSince)
}

// GivenUp tells whether name's requests have failed for the give-up bound: its open submissions are abandoned.
func (b *Breaker) GivenUp(name string) bool {
	return b != nil && b.cfg.GiveUp > 0 && b.DownFor(name) >= b.cfg.GiveUp
}

// State is name's circuit as the gauge shows it.
func (b *Breaker) State(name string) int {
	if b == nil {
		return StateClosed
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.get(name)
	switch {
	case c.openUntil.IsZero():
		return StateClosed
	case b.now().Before(c.openUntil):
		return StateOpen
	}
	return StateHalfOpen
}

// IsOpen: open now, not half-open (unlike Allow, it takes no probe).
func (b *Breaker) IsOpen(name string) bool { return b.State(name) == StateOpen }

// Settings are the bounds the breaker applies.
func (b *Breaker) Settings() CircuitSettings {
	if b == nil {
		return CircuitSettings{}
	}
	return b.cfg
}

// keyCodes are the answers that mean the key (or the worker's address) is refused: nothing sent with it can work.
var keyCodes = map[string]bool{
	"ERROR_WRONG_USER_KEY": true, "ERROR_KEY_DOES_NOT_EXIST": true, "ERROR_IP_NOT_ALLOWED": true,
	"ERROR_IP_BLOCKED": true, "ERROR_ACCOUNT_SUSPENDED": true, "ERROR_KEY_DENIED_ACCESS": true,
}

// OutcomeOf is what a provider request that ended with err says about the provider.
func OutcomeOf(err error) Outcome {
	if err == nil {
		return OutcomeOK
	}
	if IsTransportError(err) {
		return OutcomeUnreachable
	}
	var pe *Error
	if !errors.As(err, &pe) {
		return OutcomeOther
	}
	switch {
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
