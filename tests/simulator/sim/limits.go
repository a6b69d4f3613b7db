package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/captchaflow/captchaflow/providers"
	"github.com/captchaflow/captchaflow/providers/callback"
)

// Account limits: the two rules a provider account is held to, per key, both off by default.
//
// The submission rule is 2captcha's for in.php (https://2captcha.com/api-docs/limits: "If your timeouts are
// configured incorrectly your account or IP address will be temporary blocked. See the list of error codes in the
// table"; the table's MAX_USER_TURN row — more than 60 requests to in.php within 3 seconds, the account banned for 10
// seconds — is as issue 31 quotes it, the stored copy of the page ends before it): more than SubmitLimit submissions
// with one key within any SubmitWindow answer MaxUserTurn and bar the key for SubmitBan, during which every
// submission answers MaxUserTurn too. The bar is not extended by the requests made during it — "banned for 10
// seconds" — and they do not count towards the next window, which starts empty when the bar ends: a client that
// keeps retrying is barred again only if it sends more than SubmitLimit within a window after the bar.
// SubmitCountBarred (SIM_SUBMIT_COUNT_BARRED) is the stricter reading: the refused requests count towards the window,
// so a client that keeps sending through the bar is barred again the moment it ends.
//
// The result rule is a budget of ResultRate result requests (res.php action=get, getTaskResult) per key within any
// second, a sliding window; a request over it answers the protocol's rate refusal, is not counted against the
// budget and does not reach its task. Only answered requests spend the budget.
//
// createTask answers both with its flavor's documented rate refusal (rateRefusals).

// Rate refusals.
const (
	// MaxUserTurn is in.php's answer over the submission rule (2captcha, CaptchaAI).
	MaxUserTurn = "MAX_USER_TURN"
	// ErrorTooMuchRequests is res.php's answer over the result budget, and CapMonster's (REQUEST LIMIT EXCEEDED:
	// https://docs.capmonster.cloud/docs/api/api-errors).
	ErrorTooMuchRequests = "ERROR_TOO_MUCH_REQUESTS"
	// ErrorRateLimit is CapSolver's "Request frequency/rate limit" (https://docs.capsolver.com/guide/api-error).
	ErrorRateLimit = "ERROR_RATE_LIMIT"
)

// rateRefusal is how a createTask flavor refuses a request over its account's rate: the createTask code, the
// getTaskResult code and the HTTP status of both (0: the flavor's usual error status).
type rateRefusal struct {
	submit, result string
	status         int
}

// rateRefusals, by flavor. Anti-Captcha's error list documents no rate code: its front end's HTTP 429 (with the
// envelope's ERROR_TOO_MUCH_REQUESTS) is what a client must expect. 2captcha's API v2 shares API v1's account and
// limits, so it answers API v1's codes. CapSolver answers its errors with HTTP 400 and the envelope.
var rateRefusals = map[providers.Flavor]rateRefusal{
	callback.AntiCaptcha: {submit: ErrorTooMuchRequests, result: ErrorTooMuchRequests, status: http.StatusTooManyRequests},
	callback.TwoCaptcha:  {submit: MaxUserTurn, result: ErrorTooMuchRequests},
	callback.CapMonster:  {submit: ErrorTooMuchRequests, result: ErrorTooMuchRequests},
	callback.CapSolver:   {submit: ErrorRateLimit, result: ErrorRateLimit},
}

// LimitStats is the account limits' part of /_sim/stats: the rules in force and what they saw since the last reset.
type LimitStats struct {
	SubmitLimit    int   `json:"submit_limit"` // 0: the submission rule is off
	SubmitWindowMS int64 `json:"submit_window_ms"`
	SubmitBanMS    int64 `json:"submit_ban_ms"`
	ResultRate     int   `json:"result_rate"` // 0: the result budget is off
	// SubmitRequests counts submissions (in.php, createTask) with a known key, refused ones included; SubmitRefused
	// those answered the rate refusal (also in submissions.rejected_by_code), Bans the bars begun.
	SubmitRequests int64 `json:"submit_requests"`
	SubmitRefused  int64 `json:"submit_refused"`
	Bans           int64 `json:"bans"`
	// PeakSubmitsInWindow is the most submissions one key made within any SubmitWindow, refused ones included
	// (measured with the rule off too).
	PeakSubmitsInWindow int `json:"peak_submits_in_window"`
	// ResultRequests counts result requests with a known key, refused ones included; ResultRefused those over the
	// budget; PeakResultsPerSecond the most one key made within any second, refused ones included.
	ResultRequests       int64 `json:"result_requests"`
	ResultRefused        int64 `json:"result_refused"`
	PeakResultsPerSecond int   `json:"peak_results_per_second"`
}

// LimitsDoc is the GET / PUT /_sim/limits document: the two rules, changed at run time. A PUT replaces all four (a
// window or ban of 0 is the default, 3 s and 10 s) and starts afresh: bars in force end, and the counters and peaks
// of LimitStats restart, so a phase can read its own.
type LimitsDoc struct {
	SubmitLimit    int   `json:"submit_limit"`
	SubmitWindowMS int64 `json:"submit_window_ms"`
	SubmitBanMS    int64 `json:"submit_ban_ms"`
	ResultRate     int   `json:"result_rate"`
}

// limitState is the rules and their per-key state; guarded by Simulator.mu.
type limitState struct {
	submitLimit             int
	submitWindow, submitBan time.Duration
	countBarred             bool
	resultRate              int

	counted  map[string][]time.Time // per key: the submissions the rule counts, within the window
	barred   map[string]time.Time   // per key: the end of its bar
	seen     map[string][]time.Time // per key: every submission within the window (the peak)
	answered map[string][]time.Time // per key: the result requests answered within the last second
	results  map[string][]time.Time // per key: every result request within the last second (the peak)
	stats    LimitStats
}

func newLimitState(cfg Config) limitState {
	return limitState{submitLimit: cfg.SubmitLimit, submitWindow: cfg.SubmitWindow, submitBan: cfg.SubmitBan,
		countBarred: cfg.SubmitCountBarred, resultRate: cfg.ResultRate, counted: map[string][]time.Time{}, barred: map[string]time.Time{},
		seen: map[string][]time.Time{}, answered: map[string][]time.Time{}, results: map[string][]time.Time{}}
}

// reset forgets the counts and bars, keeping the rules.
func (ls *limitState) reset() {
	*ls = newLimitState(ls.config())
}

func (ls *limitState) config() Config {
	return Config{SubmitLimit: ls.submitLimit, SubmitWindow: ls.submitWindow, SubmitBan: ls.submitBan,
		SubmitCountBarred: ls.countBarred, ResultRate: ls.resultRate}
}

// since drops the times at or before cutoff from a time-ordered list.
func since(ts []time.Time, cutoff time.Time) []time.Time {
	i := 0
	for i < len(ts) && !ts[i].After(cutoff) {
		i++
	}
	return ts[i:]
}

// admitSubmit applies the submission rule to one request of key at now: false means refuse it.
func (ls *limitState) admitSubmit(key string, now time.Time) bool {
	ls.stats.SubmitRequests++
	ls.seen[key] = append(since(ls.seen[key], now.Add(-ls.submitWindow)), now)
	ls.stats.PeakSubmitsInWindow = max(ls.stats.PeakSubmitsInWindow, len(ls.seen[key]))
	if ls.submitLimit <= 0 {
		return true
	}
	if now.Before(ls.barred[key]) {
		if ls.countBarred {
			ls.counted[key] = append(since(ls.counted[key], now.Add(-ls.submitWindow)), now)
		}
		ls.stats.SubmitRefused++
		return false
	}
	delete(ls.barred, key)
	counted := append(since(ls.counted[key], now.Add(-ls.submitWindow)), now)
	if len(counted) <= ls.submitLimit {
		ls.counted[key] = counted
		return true
	}
	if !ls.countBarred {
		delete(ls.counted, key) // the next window starts when the bar ends
	}
	ls.barred[key] = now.Add(ls.submitBan)
	ls.stats.Bans++
	ls.stats.SubmitRefused++
	return false
}

// admitResult applies the result budget to one request of key at now: false means refuse it.
func (ls *limitState) admitResult(key string, now time.Time) bool {
	ls.stats.ResultRequests++
	ls.results[key] = append(since(ls.results[key], now.Add(-time.Second)), now)
	ls.stats.PeakResultsPerSecond = max(ls.stats.PeakResultsPerSecond, len(ls.results[key]))
	if ls.resultRate <= 0 {
		return true
	}
	answered := since(ls.answered[key], now.Add(-time.Second))
	if len(answered) >= ls.resultRate {
		ls.answered[key] = answered
		ls.stats.ResultRefused++
		return false
	}
	ls.answered[key] = append(answered, now)
	return true
}

func (ls *limitState) doc() LimitsDoc {
	return LimitsDoc{SubmitLimit: ls.submitLimit, SubmitWindowMS: ls.submitWindow.Milliseconds(),
		SubmitBanMS: ls.submitBan.Milliseconds(), ResultRate: ls.resultRate}
}

func (ls *limitState) snapshot() LimitStats {
	st := ls.stats
	d := ls.doc()
	st.SubmitLimit, st.SubmitWindowMS, st.SubmitBanMS, st.ResultRate = d.SubmitLimit, d.SubmitWindowMS, d.SubmitBanMS, d.ResultRate
	return st
}

// limitErrors checks the account limits.
func limitErrors(limit int, window, ban time.Duration, rate int) []error {
	var errs []error
	if limit < 0 {
		errs = append(errs, fmt.Errorf("submit limit must be >= 0, got %d", limit))
	}
	if window <= 0 {
		errs = append(errs, fmt.Errorf("submit window must be positive, got %s", window))
	}
	if ban < 0 {
		errs = append(errs, fmt.Errorf("submit ban must not be negative, got %s", ban))
	}
	if rate < 0 {
		errs = append(errs, fmt.Errorf("result rate must be >= 0, got %d", rate))
	}
	return errs
}

// admitSubmitFor applies the submission rule to a request of a known key; a refusal is counted as rejected.
func (s *Simulator) admitSubmitFor(key string) (reply, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.limits.admitSubmit(key, time.Now()) {
		return reply{}, true
	}
	code := MaxUserTurn
	if s.cfg.Protocol == ProtocolCreateTask {
		code = rateRefusals[s.profile.Flavor].submit
	}
	s.rejectLocked(code)
	return errReplyf(code, "Too many requests: the account is barred for a while."), false
}

// admitResultFor applies the result budget to a request of a known key.
func (s *Simulator) admitResultFor(key string) (reply, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.limits.admitResult(key, time.Now()) {
		return reply{}, true
	}
	code := ErrorTooMuchRequests
	if s.cfg.Protocol == ProtocolCreateTask {
		code = rateRefusals[s.profile.Flavor].result
	}
	return errReply(code), false
}

// limitRes wraps res.php: a result request (action=get) of a known key over the budget is answered the refusal,
// and counted as a res.php call, before res.php looks at it.
func (s *Simulator) limitRes(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if r.ParseForm() == nil && r.Form.Get("action") == "get" {
			if _, known := s.checkKey(r.Form.Get("key")); known {
				if rp, ok := s.admitResultFor(r.Form.Get("key")); !ok {
					s.countResCall("get")
					rp.write(w, wantsJSON(r))
					return
				}
			}
		}
		next(w, r)
	}
}

// SetLimits changes the account limits at run time and restarts their counters (LimitsDoc).
func (s *Simulator) SetLimits(doc LimitsDoc) error {
	window := time.Duration(doc.SubmitWindowMS) * time.Millisecond
	if doc.SubmitWindowMS == 0 {
		window = 3 * time.Second
	}
	ban := time.Duration(doc.SubmitBanMS) * time.Millisecond
	if doc.SubmitBanMS == 0 {
		ban = 10 * time.Second
	}
	if err := errors.Join(limitErrors(doc.SubmitLimit, window, ban, doc.ResultRate)...); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limits = newLimitState(Config{SubmitLimit: doc.SubmitLimit, SubmitWindow: window, SubmitBan: ban,
		SubmitCountBarred: s.limits.countBarred, ResultRate: doc.ResultRate})
	return nil
}

// Limits returns the account limits in force.
func (s *Simulator) Limits() LimitsDoc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limits.doc()
}

func (s *Simulator) handleSetLimits(w http.ResponseWriter, r *http.Request) {
	var doc LimitsDoc
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid limits document: " + err.Error()})
		return
	}
	if err := s.SetLimits(doc); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, s.Limits())
}
