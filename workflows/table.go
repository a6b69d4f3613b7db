package workflows

// The run's submissions, and the listener that files every callback, hint and grant in them; solve.go acts on them.

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/providers"
	"github.com/captchaflow/captchaflow/providers/callback"
)

// subState is what became of one submission (the status query shows it).
type subState string

const (
	subSubmitting subState = "submitting"  // in.php is being asked
	subAnswerLost subState = "answer_lost" // in.php's answer was lost: the provider may be solving it, ID unknown
	subWaiting    subState = "waiting"     // accepted: its callback or poll is awaited
	subSolved     subState = "solved"      // its code is the result (or was, before the token expired)
	subUnsolvable subState = "unsolvable"  // the provider gave up on it
	subRefused    subState = "refused"     // in.php refused it (unsolvable, zero balance, or a config error)
	subSuperseded subState = "superseded"  // closed while open: another answer or a refresh came first
	subAbandoned  subState = "abandoned"   // its provider was unreachable past PROVIDER_GIVE_UP
)

// submission is one in.php request of this run.
type submission struct {
	N, Round    int // Round: the solve it belongs to (0, then one per refresh)
	ProviderID  string
	State       subState
	Provider    string        // "" on a worker without PROVIDERS_FILE
	giveUp      time.Duration // PROVIDER_GIVE_UP, 0 when the task has nowhere else to go
	SubmittedAt time.Time
	answer      *outcome               // what arrived for it first: the main line acts on it
	inbox       []captchaflow.Callback // callbacks that came while in.php was asked
	untokened   int                    // untokened hints taken (captchaflow.UntokenedHintsPerSubmission)
	confirms    int                    // res.php confirmations started (maxConfirmsPerSubmission)
	asking      int                    // polls and confirmations running (a poll runs until sub settles)
	urlRun      string                 // the run its pingback URL names, as Submit echoed it ("": not known from history)
	price       float64                // what it costs (Submit's price, or the provider's reported cost)
	refunds     bool                   // an unsolvable end costs nothing
	route       *captchaflow.Route     // why it went to Provider
	pin         string                 // the provider the workflow sent it to (paced tasks)
	unpaced     bool                   // its results queue started no poll in queueWait: the next one runs on the task's own
	rejected    string                 // the proxy word its lost answer's callback ended it with
}

// cost is what sub costs: its price, unless it ended unsolvable at a provider that refunds those.
func (sub *submission) cost() float64 {
	if sub.State == subUnsolvable && sub.refunds {
		return 0
	}
	return sub.price
}

// cost is the run's submissions' sum, to the micro-dollar.
func (t *table) cost() (sum float64) {
	for _, sub := range t.subs {
		sum += sub.cost()
	}
	return math.Round(sum*1e6) / 1e6
}

// open tells whether the provider may still answer it.
func (sub *submission) open() bool {
	return sub.State == subSubmitting || sub.State == subAnswerLost || sub.State == subWaiting
}

// file makes o sub's answer, unless one arrived first.
func (sub *submission) file(o outcome) {
	if sub.answer == nil && sub.open() {
		sub.answer = &o
	}
}

// solved files the answer (its code, user agent and cookies), received at captchaflow at receivedAt, as sub's.
func (sub *submission) solved(ans captchaflow.Result, via captchaflow.Via, receivedAt time.Time) {
	ans.ProviderTaskID, ans.Provider, ans.Via, ans.ReceivedAt = sub.ProviderID, sub.Provider, via, receivedAt
	sub.file(outcome{kind: outSolved, res: ans})
}

// table is the run's submissions, oldest first, and the answers it adopted from submissions a reset discarded.
type table struct {
	runID   string
	round   int
	subs    []*submission
	adopted []*submission
}

// epochSep joins the chain's run ID and the reset run's in a pingback URL (the previous release's ingress takes it).
const epochSep = "~"

// urlRun is what a new submission's pingback URL names: the chain's run, and in a reset run which run made it (its last
// 8 characters, random in a UUIDv7), so the callback of a submission the reset discarded is told from this run's.
func urlRun(chain, run string) string {
	if run == chain {
		return chain
	}
	return chain + epochSep + run[max(0, len(run)-8):]
}

// discarded tells whether cb is from a submission a reset discarded: only a reset run has any, and it never made one
// under that URL. Only the URL Submit echoed counts: a reset run replays its chain's submissions under its own run ID.
func (t *table) discarded(ctx workflow.Context, sub *submission, cb captchaflow.Callback) bool {
	return cb.RunID != "" && workflow.GetInfo(ctx).WorkflowExecution.RunID != t.runID &&
		(sub == nil || sub.urlRun != "" && sub.urlRun != cb.RunID || sub.State == subRefused && sub.urlRun == "" && changed(ctx, changeInbox))
}

func (t *table) current() *submission {
	if len(t.subs) == 0 {
		return nil
	}
	return t.subs[len(t.subs)-1]
}

// supersede closes every open submission: another answer, or a refresh, came first.
func (t *table) supersede() {
	for _, sub := range t.subs {
		if sub.open() {
			sub.State = subSuperseded
		}
	}
}

// answered is the lost submission of this solve whose answer came first, nil when none did.
func (t *table) answered() (first *submission) {
	for _, sub := range slices.Concat(t.subs, t.adopted) {
		if sub.Round == t.round && sub.State == subSolved && sub.answer != nil && sub.answer.kind == outSolved &&
			(first == nil || sub.answer.res.ReceivedAt.Before(first.answer.res.ReceivedAt)) {
			first = sub
		}
	}
	return first
}

// heldLive is the solve's answered submission whose token lives the longest, long enough for a delivery attempt (nil:
// none), other than the expired token's; one stamped after now is skipped: settle would stamp it now, for a life that
// never runs out.
func (t *table) heldLive(in captchaflow.Input, now time.Time, expired string) (best *submission) {
	at := now.Add(DeliverStartToClose + deliveryExpiryMargin)
	for _, sub := range slices.Concat(t.subs, t.adopted) {
		if sub.Round != t.round || sub.State != subSolved || sub.answer == nil || sub.answer.kind != outSolved ||
			sub.answer.res.ReceivedAt.After(now) || sub.answer.res.Code == expired { // its filed stamp may run ahead of settle's
			continue
		}
		if exp := in.ExpiresAt(sub.answer.res.ReceivedAt); exp.After(at) && (best == nil || exp.After(in.ExpiresAt(best.answer.res.ReceivedAt))) {
			best = sub
		}
	}
	return best
}

// rejected is a submission of the solve whose lost answer's callback said the proxy failed (nil: none).
func (t *table) rejected() *submission {
	for _, sub := range t.subs {
		if sub.Round == t.round && sub.rejected != "" {
			return sub
		}
	}
	return nil
}

// settled: a lost submission answered, with a code or a proxy word; what waits for either stops.
func (t *table) settled() bool { return t.answered() != nil || t.rejected() != nil }

// listen routes signals as they arrive; ReceiveAsync, as the SDK drops a corrupt payload and must not block it.
func (s *solver) listen(ctx workflow.Context) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	for {
		_ = workflow.Await(dctx, func() bool { return !s.quiet() })
		for cb := (captchaflow.Callback{}); s.callbacks.ReceiveAsync(&cb); cb = (captchaflow.Callback{}) {
			s.routeCallback(ctx, cb)
			s.releaseKept(ctx, false) // a lost submission this callback settled holds its slot no longer
		}
		for g := (activities.SlotRequest{}); s.grants.ReceiveAsync(&g); g = (activities.SlotRequest{}) {
			s.receiveGrant(ctx, g)
		}
	}
}

// quiet tells whether every signal that arrived has been routed: the main line acts only then.
func (s *solver) quiet() bool { return s.callbacks.Len() == 0 && s.grants.Len() == 0 }

// await blocks until every signal that arrived is routed and cond holds.
func (s *solver) await(ctx workflow.Context, cond func() bool) error {
	return workflow.Await(ctx, func() bool { return s.quiet() && cond() })
}

func (s *solver) waitFor(ctx workflow.Context, f workflow.Future) { _ = s.await(ctx, f.IsReady) }

// awaitFor is await for at most d: true when cond holds, false when d passed (no timer when d <= 0 or cond holds).
func (s *solver) awaitFor(ctx workflow.Context, d time.Duration, cond func() bool) (bool, error) {
	if err := workflow.Await(ctx, s.quiet); err != nil || cond() || d <= 0 {
		return err == nil && cond(), err
	}
	timerCtx, cancel := workflow.WithCancel(ctx)
	defer cancel()
	timer := workflow.NewTimer(timerCtx, d)
	if err := s.await(ctx, func() bool { return cond() || timer.IsReady() }); err != nil || cond() {
		return err == nil, err
	}
	return false, timer.Get(ctx, nil)
}

// sleep waits d (cut to the deadline), ending early when a lost submission answers.
func (s *solver) sleep(ctx workflow.Context, d time.Duration) error {
	_, err := s.awaitFor(ctx, min(d, s.remaining(ctx)), s.table.settled)
	return err
}

// routeCallback files cb under the submission its pingback URL names.
func (s *solver) routeCallback(ctx workflow.Context, cb captchaflow.Callback) {
	if cb.ReceivedAt.IsZero() { // an ingress that does not stamp it: this workflow task is the best we know
		cb.ReceivedAt = workflow.Now(ctx)
	}
	cb.ReceivedAt = heldAt(ctx, time.Time{}, cb.ReceivedAt) // a clock ahead is held here: it may be filed for later
	t := &s.table
	stale := func(why string) {
		s.logger.Info("callback ignored: "+why, "CallbackProviderTaskID", cb.ProviderTaskID,
			"CallbackSubmission", cb.Submission, "Authenticated", cb.Authenticated)
	}
	var sub *submission
	if cb.Submission > 0 && cb.Submission <= len(t.subs) {
		sub = t.subs[cb.Submission-1]
	}
	chain, _, _ := strings.Cut(cb.RunID, epochSep)
	switch cur := t.current(); {
	case cb.RunID != "" && chain != t.runID:
		stale("a callback of an earlier run")
	case cb.Submission == 0 && cb.Authenticated:
		stale("a callback from a URL that names no submission")
	case cb.Submission == 0 && cur != nil && cur.State == subWaiting && cb.ProviderTaskID == cur.ProviderID:
		s.confirm(ctx, cur, "unauthenticated callback")
	case cb.Submission == 0:
		stale("an unauthenticated callback that names no waiting submission")
	case t.discarded(ctx, sub, cb) && changed(ctx, changeQuirks):
		s.adopt(ctx, cb, stale)
	case cb.RunID != "" && cb.RunID != t.runID && (sub == nil || sub.urlRun != "" && cb.RunID != sub.urlRun):
		stale("a callback of an earlier run")
	case sub == nil:
		stale("a callback naming a submission this run never made")
	case sub.Round != t.round:
		stale("a callback of an expired solve round")
	case sub.State == subAnswerLost:
		s.lostCallback(ctx, sub, cb, stale)
	case sub.State == subSuperseded && cb.Authenticated && !otherCandidate(sub, cb) &&
		(cb.ProviderTaskID == "" || sub.ProviderID == "" || cb.ProviderTaskID == sub.ProviderID):
		s.lateCallback(ctx, sub, cb, stale)
	case sub != cur || !sub.open():
		stale("a callback of an earlier or settled submission (" + string(sub.State) + ")")
	case sub.State == subSubmitting:
		sub.inbox = append(sub.inbox, cb) // its ID is not known yet: learnID replays it
	default:
		s.onCallback(ctx, sub, cb)
	}
}

// onCallback files a callback's code or "unsolvable" as the waiting sub's answer, or confirms it with res.php. Its
// token ties it to sub, so one naming no task (CapMonster's, Anti-Captcha's) is sub's; one naming another is confirmed.
func (s *solver) onCallback(ctx workflow.Context, sub *submission, cb captchaflow.Callback) {
	switch word := strings.TrimSpace(cb.Code); {
	case otherCandidate(sub, cb) && s.solution(ctx, cb): // another candidate made a task after all: the result is that provider's
		sub.file(outcome{kind: outSolved, res: captchaflow.Result{ProviderTaskID: cb.ProviderTaskID, Provider: cb.Provider,
			Code: cb.Code, Via: captchaflow.ViaCallback, ReceivedAt: cb.ReceivedAt}})
	case otherCandidate(sub, cb):
		s.logger.Warn("ignoring a callback of another candidate that is not a solution", "CallbackProvider", cb.Provider,
			"CallbackProviderTaskID", cb.ProviderTaskID, "Provider", sub.Provider)
	case cb.Code == "" && cb.Authenticated, len(cb.Code) > captchaflow.MaxCodeBytes:
		s.logger.Warn("ignoring a callback without a code or over the bound on a code", "ProviderTaskID", cb.ProviderTaskID,
			"Bytes", len(cb.Code), "Authenticated", cb.Authenticated)
	case !cb.Authenticated:
		s.confirm(ctx, sub, "unauthenticated callback")
	case cb.ProviderTaskID != sub.ProviderID && !(cb.ProviderTaskID == "" && changed(ctx, changeQuirks)):
		// Naming another task on a URL handed out for this one takes a leaked URL (resets have URLs of their own).
		s.confirm(ctx, sub, "a callback naming another provider task")
	case proxyWord(ctx, word):
		s.logger.Warn("the provider called back that it could not use the task's proxy", "ProviderTaskID", sub.ProviderID, "Code", word)
		sub.file(failed(activities.ProxyRejected(word, s.in.Params)))
	case callback.IsStatusWord(cb.Code) && resubmitWord(word):
		s.logger.Info("the provider called back that it gave up", "ProviderTaskID", sub.ProviderID, "Code", cb.Code)
		sub.file(outcome{kind: outResubmit, reason: "the callback said " + word})
	case callback.IsStatusWord(cb.Code):
		s.confirm(ctx, sub, fmt.Sprintf("callback with the status word %.64s", word))
	case providers.AnswersMore(s.in.Method, s.in.Params) != "" && changed(ctx, changeKinds) && !changed(ctx, changeWhole):
		s.confirm(ctx, sub, "a callback of a kind whose answer holds more than its code")
	default: // a kind that answers more is completed as it settles
		sub.solved(captchaflow.Result{Code: cb.Code}, captchaflow.ViaCallback, cb.ReceivedAt)
	}
}

// lateCallback takes what a submission the settled solve superseded says of its own task: a paid code (held: it is
// delivered should the token expire undelivered) or a proxy word (a refresh would send the same proxy).
func (s *solver) lateCallback(ctx workflow.Context, sub *submission, cb captchaflow.Callback, stale func(string)) {
	switch word := strings.TrimSpace(cb.Code); {
	case callback.IsStatusWord(word) && callback.ClassifyCode(word) == callback.ClassProxy:
		s.proxySaid = word
		stale("a proxy word of a superseded submission: no refresh will send that proxy")
	case sub.answer == nil && s.solution(ctx, cb) && changed(ctx, changeWhole):
		sub.ProviderID, sub.State = cmp.Or(sub.ProviderID, cb.ProviderTaskID), subAnswerLost // open: solved files it
		sub.Provider = cmp.Or(sub.Provider, cb.Provider)                                     // its Submit cancelled unanswered
		sub.solved(captchaflow.Result{Code: cb.Code}, captchaflow.ViaCallback, cb.ReceivedAt)
		sub.State = subSolved
	default:
		stale("a callback of an earlier or settled submission (superseded)")
	}
}

// proxyWord: the provider could not use the task's proxy (asks the gate only then: older histories resubmitted).
func proxyWord(ctx workflow.Context, word string) bool {
	return callback.IsStatusWord(word) && callback.ClassifyCode(word) == callback.ClassProxy && changed(ctx, changeProxies)
}

// resubmitWord: the provider gave up on the task; ERROR_PROXY_CONNECTION_FAILED was one before proxy words had their
// class, and stays one where a history recorded then, or a lost submission, meets it.
func resubmitWord(word string) bool {
	return callback.ClassifyCode(word) == callback.ClassResubmit || callback.Canonical(word) == "ERROR_PROXY_CONNECTION_FAILED"
}

// adopt takes the solution of a submission a reset discarded: it was paid for, so it answers the solve.
func (s *solver) adopt(ctx workflow.Context, cb captchaflow.Callback, stale func(string)) {
	if slices.ContainsFunc(s.table.adopted, func(a *submission) bool { return a.urlRun == cb.RunID && a.N == cb.Submission }) {
		stale("a repeat of a discarded submission's answer, taken or dead already") // in an earlier round its token may be dead
		return
	}
	// Parked while a Submit waited, it may be dead by now: taken, it would supersede a live submission of this run.
	if exp := s.in.ExpiresAt(cb.ReceivedAt); !exp.IsZero() && !workflow.Now(ctx).Before(exp) && changed(ctx, changeInbox) {
		stale("a discarded submission's answer whose token expired before it could be taken")
		s.table.adopted = append(s.table.adopted, &submission{N: cb.Submission, State: subSuperseded, urlRun: cb.RunID}) // so are its repeats
		return
	}
	sub := &submission{N: cb.Submission, Round: s.table.round, State: subAnswerLost, Provider: cb.Provider,
		SubmittedAt: cb.ReceivedAt, urlRun: cb.RunID}
	if s.lostCallback(ctx, sub, cb, stale); sub.State == subSolved {
		s.table.adopted = append(s.table.adopted, sub)
	}
}

// lostCallback takes cb as the answer of a submission with no ID to poll: hints and status words are dropped.
func (s *solver) lostCallback(ctx workflow.Context, lost *submission, cb captchaflow.Callback, stale func(string)) {
	switch word := strings.TrimSpace(cb.Code); {
	case cb.Authenticated && !otherCandidate(lost, cb) && proxyWord(ctx, word):
		lost.ProviderID, lost.State, lost.rejected = cb.ProviderTaskID, subUnsolvable, word // the task ends: awaitLost
	case cb.Authenticated && !otherCandidate(lost, cb) && resubmitWord(word):
		lost.ProviderID, lost.State = cb.ProviderTaskID, subUnsolvable // nothing more will come
	case !s.solution(ctx, cb):
		stale("not an authenticated solution (a lost submission can only be answered by one)")
	default:
		lost.ProviderID, lost.Provider = cb.ProviderTaskID, cmp.Or(cb.Provider, lost.Provider)
		lost.solved(captchaflow.Result{Code: cb.Code}, captchaflow.ViaCallback, cb.ReceivedAt)
		lost.State = subSolved
	}
}

// learnID records what in.php answered for sub (its ID, or its answer lost, or neither: refused, cancelled) and
// routes what came meanwhile; a solution for a submission that created no task of its own is one the task paid for.
func (s *solver) learnID(ctx workflow.Context, sub *submission, id string, state subState) {
	sub.ProviderID, sub.State = id, state
	inbox, dropped := sub.inbox, func(why string) { s.logger.Warn("a parked callback dropped: "+why, "Submission", sub.N) }
	sub.inbox = nil
	for _, cb := range inbox {
		switch {
		case s.table.discarded(ctx, sub, cb) && changed(ctx, changeQuirks): // its URL is known only now
			s.adopt(ctx, cb, dropped)
		case state == subAnswerLost:
			s.lostCallback(ctx, sub, cb, dropped)
		case state == subWaiting:
			s.onCallback(ctx, sub, cb)
		default:
			s.adopt(ctx, cb, dropped)
		}
	}
}

// unpark routes what sub parked once its Submit ended with no ID and no wait to follow (asked only then: older
// builds dropped it); a lost answer's parked solution is then sub's own.
func (s *solver) unpark(ctx workflow.Context, sub *submission, lost bool) {
	if !slices.ContainsFunc(sub.inbox, func(cb captchaflow.Callback) bool { return cb.Authenticated }) || !changed(ctx, changeInbox) {
		sub.inbox = nil // nothing in it a newer build would take
		return
	}
	state := map[bool]subState{true: subAnswerLost, false: sub.State}[lost]
	s.learnID(ctx, sub, "", state)
}

// confirm asks res.php for sub's code, at most maxConfirmsPerSubmission times and never twice at once.
func (s *solver) confirm(ctx workflow.Context, sub *submission, why string) {
	if sub.asking > 0 || sub.confirms >= maxConfirmsPerSubmission {
		s.logger.Info(why+" while res.php is being asked or its confirmations are spent; ignored", "ProviderTaskID", sub.ProviderID)
		return
	}
	s.logger.Info(why+"; confirming with res.php", "ProviderTaskID", sub.ProviderID)
	sub.confirms++
	// NotReady means the hint was wrong (or early): not retried.
	s.ask(ctx, ctx, sub, captchaflow.ViaCallback, false, &temporal.RetryPolicy{InitialInterval: time.Second,
		BackoffCoefficient: 2, MaximumAttempts: confirmAttempts,
		NonRetryableErrorTypes: append([]string{activities.FailureNotReady}, activities.NonRetryableProviderErrors...)})
}

// completeAnswer fetches, by one result request of the task's own, what a code of a kind that answers more came without
// (a lost submission's or another candidate's pingback carries the code alone); failing, the paid code goes alone.
func (s *solver) completeAnswer(ctx workflow.Context, res captchaflow.Result) captchaflow.Result {
	kind := providers.AnswersMore(s.in.Method, s.in.Params)
	left := min(s.remaining(ctx), time.Minute)
	if kind == "" || res.UserAgent != "" || res.Cookies != "" || res.ProviderTaskID == "" || left <= 0 || !changed(ctx, changeAnswersCompleted) {
		return res
	}
	whole, start, queue := changed(ctx, changeWhole), workflow.Now(ctx), s.queueOf(res.Provider, activities.ResultsQueue)
	if exp := s.in.ExpiresAt(res.ReceivedAt); whole && !exp.IsZero() { // within half its life: the other half is the delivery's
		if left = min(left, (exp.Sub(start)-deliveryExpiryMargin)/2); left <= 0 {
			return res
		}
	}
	req := activities.PollRequest{ProviderTaskID: res.ProviderTaskID, Provider: res.Provider, Method: s.in.Method, Kind: string(kind)}
	actx := s.onQueue(withRetry(ctx, ProviderStartToClose, left, &temporal.RetryPolicy{InitialInterval: time.Second,
		BackoffCoefficient: 2, MaximumAttempts: confirmAttempts, NonRetryableErrorTypes: activities.NonRetryableProviderErrors}),
		queue, pollPriority(left))
	if whole && queue != "" {
		actx = workflow.WithScheduleToStartTimeout(actx, left/2) // the other half for the task's own queue
	}
	var r activities.PollResult
	err := workflow.ExecuteActivity(actx, acts.Poll, req).Get(ctx, &r)
	if rest := start.Add(left).Sub(workflow.Now(ctx)); whole && notStarted(err) && rest > 0 { // its provider's queue unserved
		err = workflow.ExecuteActivity(withRetry(ctx, ProviderStartToClose, rest, &temporal.RetryPolicy{MaximumAttempts: 1}), acts.Poll, req).Get(ctx, &r)
	}
	if err != nil || r.Code == "" {
		s.logger.Warn("the answer's user agent and cookies could not be fetched: the code goes alone", "ProviderTaskID", res.ProviderTaskID, "Error", err)
		return res
	}
	// The provider's answer for the task, whole: an in.php DataDome pingback's code is its Set-Cookie line.
	res.Code, res.UserAgent, res.Cookies = r.Code, r.UserAgent, r.Cookies
	return res
}

// pollRetry asks every poll interval: the retry policy is the polling loop.
func (s *solver) pollRetry() *temporal.RetryPolicy {
	interval := s.in.PollInterval()
	return &temporal.RetryPolicy{InitialInterval: interval, BackoffCoefficient: 1, MaximumInterval: interval,
		NonRetryableErrorTypes: activities.NonRetryableProviderErrors}
}

// ask runs one Poll activity (in actx) and files its answer; a confirmation that fails leaves the task waiting.
func (s *solver) ask(ctx, actx workflow.Context, sub *submission, via captchaflow.Via, giveUp bool, retry *temporal.RetryPolicy) {
	sub.asking++
	once := sub.unpaced // the one request on the task's own queue ("") after the results queue started none in queueWait
	queue := ""
	if !once {
		queue = s.queueOf(sub.Provider, activities.ResultsQueue)
	}
	req := activities.PollRequest{ProviderTaskID: sub.ProviderID, Provider: sub.Provider, GiveUp: giveUp, Method: s.in.Method,
		Kind: string(providers.AnswersMore(s.in.Method, s.in.Params))}
	if via == captchaflow.ViaPoll && !giveUp { // a confirmation and a give-up check ask at once
		req.SubmittedAt = sub.SubmittedAt
	}
	f := workflow.ExecuteActivity(s.onQueue(withRetry(actx, ProviderStartToClose, s.remaining(ctx), retry), queue,
		pollPriority(s.remaining(ctx))), acts.Poll, req)
	workflow.Go(ctx, func(ctx workflow.Context) {
		var r activities.PollResult
		err := f.Get(ctx, &r)
		if via == captchaflow.ViaCallback {
			sub.asking--
		}
		if once {
			sub.unpaced = false
		}
		// Unstarted within queueWait (a backlog, or no worker polls it): one request on the task's own queue fetches a
		// code that is ready; a poll then waits its turn on the results queue again, within the account's budget.
		switch o := s.classify(err); {
		case notStarted(err) && !once && s.remaining(ctx) > 0:
			sub.unpaced = true
			s.ask(ctx, actx, sub, via, giveUp, &temporal.RetryPolicy{MaximumAttempts: 1})
		case once && via == captchaflow.ViaPoll && captchaflow.FailureType(err) == activities.FailureNotReady && s.remaining(ctx) > 0:
			s.ask(ctx, actx, sub, via, giveUp, s.pollRetry())
		case err == nil:
			sub.price = cmp.Or(r.CostUSD, sub.price) // the provider's own figure wins
			sub.solved(captchaflow.Result{Code: r.Code, UserAgent: r.UserAgent, Cookies: r.Cookies}, via, cmp.Or(r.ReceivedAt, workflow.Now(ctx)))
		case via == captchaflow.ViaPoll && captchaflow.FailureType(err) == activities.FailureProviderGaveUp:
			sub.file(outcome{kind: outGaveUp})
		case via == captchaflow.ViaPoll || o.kind == outResubmit || captchaflow.FailureType(err) == captchaflow.FailureProxyRejected:
			sub.file(o)
		default:
			s.logger.Warn("callback not confirmed by res.php; still waiting", "ProviderTaskID", sub.ProviderID, "Error", err)
		}
	})
}

// handleHints registers the untokened hint's Update; its validator refuses an unusable hint without a history event.
func (s *solver) handleHints(ctx workflow.Context) error {
	return workflow.SetUpdateHandlerWithOptions(ctx, captchaflow.UntokenedUpdate,
		func(workflow.Context, captchaflow.UntokenedHint) error {
			cur := s.table.current()
			cur.untokened++
			s.confirm(ctx, cur, "untokened hint")
			return nil
		},
		workflow.UpdateHandlerOptions{Validator: func(_ workflow.Context, hint captchaflow.UntokenedHint) error {
			cur := s.table.current()
			switch {
			case cur == nil || cur.State != subWaiting:
				return fmt.Errorf("the task is not waiting for a callback")
			case hint.ProviderTaskID != cur.ProviderID:
				return fmt.Errorf("the task waits for another provider task")
			case cur.untokened >= captchaflow.UntokenedHintsPerSubmission:
				return fmt.Errorf("this submission's %d untokened hints are spent", captchaflow.UntokenedHintsPerSubmission)
			}
			return nil
		}})
}

// receiveGrant hands a grant to the admission; one for a request already given up is sent back.
func (s *solver) receiveGrant(ctx workflow.Context, g activities.SlotRequest) {
	ours := func(r string) bool { // a run of the chain: any grant that reaches it names one
		if r == "" || r == s.table.runID || r == s.admission.ticket.RunID {
			return r != ""
		}
		// The history holds no such run ID: a run reset from this one would replay it as another's.
		return changed(ctx, changeQuirks) || r == workflow.GetInfo(ctx).WorkflowExecution.RunID
	}
	a := &s.admission
	match := g.Seq == a.seq && g.Semaphore == a.ticket.Semaphore && ours(g.RunID)
	a.granted = a.granted || match
	if !match && ours(g.RunID) {
		s.logger.Info("a grant for a request already given up: sent back", "Seq", g.Seq)
		s.releaseTo(ctx, g)
	}
}

// otherCandidate tells whether cb came from the pingback URL of a provider other than the one that took sub.
func otherCandidate(sub *submission, cb captchaflow.Callback) bool {
	return cb.Provider != "" && sub.Provider != "" && cb.Provider != sub.Provider
}

// solution tells whether cb can be a solution: authenticated, with a code; also without a provider task ID (CapMonster
// calls back with the getTaskResult body, which has none) unless the run predates changeQuirks.
func (s *solver) solution(ctx workflow.Context, cb captchaflow.Callback) bool {
	return cb.Authenticated && strings.TrimSpace(cb.Code) != "" && len(cb.Code) <= captchaflow.MaxCodeBytes &&
		!callback.IsStatusWord(cb.Code) && (cb.ProviderTaskID != "" || changed(ctx, changeQuirks))
}
