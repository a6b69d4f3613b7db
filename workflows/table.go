package workflows

import (
	"strings"
	"time"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/providers/callback"
)

// The table of a run's submissions and the one place that routes every callback to one of them. Routing only
// changes the table; the workflow acts on what it says at its next wait, so a callback counts the same whatever
// the workflow is doing when it arrives (queued for a slot, paused for the balance, submitting, waiting, polling,
// delivering).

// subState is what became of one submission.
type subState string

const (
	subSubmitting subState = "submitting"  // in.php is being asked
	subAnswerLost subState = "answer_lost" // in.php's answer was lost: the provider may be solving it, ID unknown
	subWaiting    subState = "waiting"     // accepted: waiting for its callback
	subPolling    subState = "polling"     // accepted: res.php is being polled
	subSolved     subState = "solved"      // its code is the result (or was, before the token expired)
	subUnsolvable subState = "unsolvable"  // the provider gave up on it
	subRefused    subState = "refused"     // in.php refused it (unsolvable-class, zero balance, or a config error)
	subExpired    subState = "expired"     // its solve round ended (a refresh): nothing it says is fresh
	subSuperseded subState = "superseded"  // abandoned while still open: another submission answered first
	subAbandoned  subState = "abandoned"   // given up: its provider was unreachable past PROVIDER_GIVE_UP
)

// submission is one in.php request of this run.
type submission struct {
	N          int
	Round      int // the solve it belongs to: 0, then one per refresh
	ProviderID string
	State      subState
	// Provider took it (PROVIDERS_FILE name; "" on a worker without the file). giveUp is the worker's
	// PROVIDER_GIVE_UP as the activity reported it, 0 when the task has nowhere else to go: it never gives it up.
	Provider    string
	giveUp      time.Duration
	SubmittedAt time.Time
	// inbox holds the callbacks routed to the current submission that its wait has not acted on yet, in order.
	inbox []captchaflow.Callback
	// answer is the code of a submission whose in.php answer was lost, once its callback came.
	answer *captchaflow.Callback
	// untokened counts the untokened hints it took (captchaflow.UntokenedHintsPerSubmission).
	untokened int
}

// open tells whether the provider may still answer it.
func (sub *submission) open() bool {
	switch sub.State {
	case subSubmitting, subAnswerLost, subWaiting, subPolling:
		return true
	}
	return false
}

// table is the run's submissions, oldest first.
type table struct {
	runID string
	round int
	subs  []*submission
}

// routed says what routing did with a callback.
type routed int

const (
	routedInbox      routed = iota // to the current submission's inbox, for its wait to act on
	routedLostAnswer               // taken as the answer of a submission whose in.php answer was lost
	routedStale                    // dropped: an earlier run, round or submission, or nothing it can belong to
)

// current is the newest submission, nil before the first.
func (t *table) current() *submission {
	if len(t.subs) == 0 {
		return nil
	}
	return t.subs[len(t.subs)-1]
}

// add starts a new submission of the current round.
func (t *table) add(at time.Time) *submission {
	sub := &submission{N: len(t.subs) + 1, Round: t.round, State: subSubmitting, SubmittedAt: at}
	t.subs = append(t.subs, sub)
	return sub
}

// newRound starts a refresh: every submission so far belongs to an expired round.
func (t *table) newRound() {
	t.round++
	for _, sub := range t.subs {
		if sub.open() {
			sub.State = subExpired
		}
	}
}

// route files cb under the submission it belongs to. why names the reason when it is dropped.
func (t *table) route(cb captchaflow.Callback) (sub *submission, r routed, why string) {
	if cb.RunID != "" && cb.RunID != t.runID {
		return nil, routedStale, "a callback of an earlier run"
	}
	if cb.Submission == 0 {
		if cb.Authenticated { // every pingback URL names its submission
			return nil, routedStale, "a callback from a URL that names no submission"
		}
		return t.routeHint(cb)
	}
	if cb.Submission > len(t.subs) {
		return nil, routedStale, "a callback naming a submission this run never made"
	}
	sub = t.subs[cb.Submission-1]
	if sub.Round != t.round {
		return sub, routedStale, "a callback of an expired solve round"
	}
	if sub.State == subAnswerLost {
		return t.takeLostAnswer(sub, cb)
	}
	if sub != t.current() || !sub.open() {
		return sub, routedStale, "a callback of an earlier or settled submission (" + string(sub.State) + ")"
	}
	sub.inbox = append(sub.inbox, cb)
	return sub, routedInbox, ""
}

// routeHint files an unauthenticated callback: nothing vouches for its ID or code, so it only makes the waiting
// submission ask res.php (its wait bounds how often).
func (t *table) routeHint(cb captchaflow.Callback) (*submission, routed, string) {
	cur := t.current()
	if cur == nil || (cur.State != subWaiting && cur.State != subPolling) {
		return nil, routedStale, "an unauthenticated callback while no submission waits for one"
	}
	if cb.ProviderTaskID != cur.ProviderID {
		return nil, routedStale, "an unauthenticated callback for another provider task"
	}
	cur.inbox = append(cur.inbox, cb)
	return cur, routedInbox, ""
}

// takeLostAnswer makes cb the answer of lost, when it is one: authenticated and a solution (from whichever candidate
// it was handed to: the answer is then that provider's).
func (t *table) takeLostAnswer(lost *submission, cb captchaflow.Callback) (*submission, routed, string) {
	if cb.Submission == lost.N && cb.Authenticated && !otherCandidate(lost, cb) &&
		callback.ClassifyCode(strings.TrimSpace(cb.Code)) == callback.ClassResubmit {
		// Its own pingback URL says the provider gave up on it: nothing more will come, so it is not waited for.
		lost.ProviderID = cb.ProviderTaskID
		lost.State = subUnsolvable
		return lost, routedLostAnswer, ""
	}
	if !lostSubmissionAnswer(cb) {
		return lost, routedStale, "not an authenticated solution (a lost submission can only be answered by one)"
	}
	lost.answer = &cb
	lost.ProviderID = cb.ProviderTaskID
	if cb.Provider != "" {
		lost.Provider = cb.Provider
	}
	lost.State = subSolved
	return lost, routedLostAnswer, ""
}

// otherCandidate tells whether cb came from the pingback URL of a provider other than the one that took sub.
func otherCandidate(sub *submission, cb captchaflow.Callback) bool {
	return cb.Provider != "" && sub.Provider != "" && cb.Provider != sub.Provider
}

// learnID records the provider ID in.php gave sub.
func (t *table) learnID(sub *submission, id string) {
	sub.ProviderID = id
	sub.State = subWaiting
}

// lost marks sub's in.php answer lost. A callback that came for it while it was submitting may be its answer.
func (t *table) lost(sub *submission) *captchaflow.Callback {
	sub.State = subAnswerLost
	named := sub.inbox
	sub.inbox = nil
	for _, cb := range named {
		if _, r, _ := t.takeLostAnswer(sub, cb); r == routedLostAnswer && sub.answer != nil {
			return sub.answer
		}
	}
	return nil
}

// answered is a lost submission of this round whose answer came, nil when none did.
func (t *table) answered() *submission {
	for _, sub := range t.subs {
		if sub.Round == t.round && sub.answer != nil && sub.State == subSolved {
			return sub
		}
	}
	return nil
}

// settle closes the round once winner's code is the result: any other submission still open is superseded.
func (t *table) settle(winner *submission) {
	winner.State = subSolved
	for _, sub := range t.subs {
		if sub != winner && sub.open() {
			sub.State = subSuperseded
		}
	}
}

// statuses is the table as the status query shows it.
func (t *table) statuses() []captchaflow.SubmissionStatus {
	out := make([]captchaflow.SubmissionStatus, 0, len(t.subs))
	for _, sub := range t.subs {
		out = append(out, captchaflow.SubmissionStatus{N: sub.N, ProviderTaskID: sub.ProviderID, Provider: sub.Provider,
			State: string(sub.State)})
	}
	return out
}

// lostSubmissionAnswer tells whether cb can be the answer of a submission whose in.php answer was lost: it is
// authenticated (only our pingback URLs carry the token), names a provider task, and its code is a solution — not
// empty, not over captchaflow.MaxCodeBytes, not a provider status word.
func lostSubmissionAnswer(cb captchaflow.Callback) bool {
	return cb.Authenticated && cb.ProviderTaskID != "" && strings.TrimSpace(cb.Code) != "" &&
		len(cb.Code) <= captchaflow.MaxCodeBytes && !callback.IsStatusWord(cb.Code)
}
