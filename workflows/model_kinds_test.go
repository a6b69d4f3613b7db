package workflows

import (
	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
	"github.com/captchaflow/captchaflow/providers"
	"github.com/captchaflow/captchaflow/providers/callback"
	"io"
	"os"
)

// A kind that answers more than its code in the model: a fifth of the reCAPTCHA tasks become Cloudflare challenge
// pages (method turnstile with pagedata), whose providers answer a token with the user agent it must be used with
// (res.php's useragent, the solution's userAgent); pingbacks carry the token alone. Invariant:
//   - answers-whole: a result or delivery of such a task holds the user agent of the very provider task whose code it
//     carries (never another's, never none unless the provider could not be asked: an outage, a burst of refused
//     result requests, or the task's deadline); any other task's holds none.

// drawChallenge turns a reCAPTCHA task into a challenge page, drawn after the rest so that a seed's other draws stay.
func (m *model) drawChallenge() {
	if m.in.Method != "userrecaptcha" || m.rng.IntN(5) != 0 {
		return
	}
	m.in.Method = string(providers.KindTurnstile)
	delete(m.in.Params, "version")
	delete(m.in.Params, "action") // the fake checks a reCAPTCHA v3 action where the flavors put it
	m.in.Params["sitekey"], m.in.Params["pagedata"], m.in.Params["data"] = m.in.Params["googlekey"], "chl-page-"+m.wid, "cdata-"+m.wid
	delete(m.in.Params, "googlekey")
}

// answersMore: the task's kind answers more than its code.
func (m *model) answersMore() bool { return providers.AnswersMore(m.in.Method, m.in.Params) != "" }

// userAgentOf is the user agent the provider answers task's code with.
func userAgentOf(task *providerTask) string { return "Mozilla/5.0 (model) task/" + task.id }

// checkAnswerWhole: r's user agent is task's own, or none where the kind answers none or the provider could not be
// asked (s.mu held).
func (m *model) checkAnswerWhole(r captchaflow.Result, task *providerTask, what string) {
	switch {
	case !m.answersMore() && r.UserAgent != "":
		m.fail("answers-whole", "%s of a %s task carries a user agent %q", what, m.in.Method, r.UserAgent)
	case !m.answersMore() || r.UserAgent == userAgentOf(task):
	case r.UserAgent != "":
		m.fail("answers-whole", "%s carries the code of %s with the user agent %q, not its own", what, task.id, r.UserAgent)
	case !m.unaskable(task.provider) && !m.endedAtDeadline() && !((task.lost || task.discarded) && m.unnamedCallbacks(task.provider)):
		m.fail("answers-whole", "%s carries the code of %s without its user agent, though %q answered every result request",
			what, task.id, task.provider)
	}
}

// unnamedCallbacks: the provider's callbacks name no task (Anti-Captcha, CapMonster): a lost submission's code comes
// with no ID to ask for the rest.
func (m *model) unnamedCallbacks(provider string) bool {
	for _, p := range m.fakes {
		if p.name == provider {
			return p.flavor == callback.AntiCaptcha || p.flavor == callback.CapMonster
		}
	}
	return false
}

// endedAtDeadline: the task ended at its deadline, when a code it takes has no time left for a result request.
func (m *model) endedAtDeadline() bool {
	return !m.ended.IsZero() && !m.ended.Before(m.epoch.Add(m.in.SolveBudget()))
}

// unaskable: the provider was unreachable for a while, or refused result requests in a burst.
func (m *model) unaskable(provider string) bool {
	_, out := m.routing.outages[provider]
	return out || len(m.pace.bursts[provider+"/"+activities.ResultsQueue]) > 0
}

func modelLogOut() io.Writer {
	if *modelSeed >= 0 && os.Getenv("MODEL_LOG") != "" {
		return os.Stderr
	}
	return io.Discard
}
