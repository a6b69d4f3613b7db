package workflows

import (
	"errors"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/providers/callback"
)

// Proxied tasks in the model: a quarter of the reCAPTCHA tasks carry a proxy, and a provider may end such a task
// with its proxy word (its callback and its result answer alike). Invariants:
//   - proxy-rejected-has-a-word: a task fails ProxyRejected only if one of its provider tasks answered a proxy word;
//   - no-submit-after-proxy-word: once its latest provider task's word reached the workflow, no provider is asked
//     again (no resubmission, no failover with the same proxy);
//   - the message names the proxy's host, never its password.

const modelProxyPassword = "pw-never-shown"

// drawProxy gives a reCAPTCHA task a proxy, drawn last so that a seed's other draws stay what they were.
func (m *model) drawProxy() {
	if m.in.Method == "userrecaptcha" && m.rng.IntN(4) == 0 {
		m.in.Params["proxy"], m.in.Params["proxytype"] = "login:"+modelProxyPassword+"@203.0.113.9:3128", "HTTP"
	}
}

// proxyWordOf is the word provider ends a proxied task with when it draws a bad proxy ("": not this time).
func (m *model) proxyWordOf(provider string) string {
	if m.in.Params["proxy"] == "" || m.rng.IntN(3) != 0 {
		return ""
	}
	for _, p := range m.fakes {
		if p.name == provider && p.flavor != "" {
			return map[callback.Flavor]string{callback.AntiCaptcha: "ERROR_PROXY_CONNECT_REFUSED", callback.CapMonster: "ERROR_PROXY_NOT_AUTHORISED",
				callback.CapSolver: "ERROR_PROXY_BANNED"}[p.flavor] + map[bool]string{true: "ERROR_PROXY_CONNECTION_FAILED"}[p.flavor == callback.TwoCaptcha]
		}
	}
	return "ERROR_PROXY_CONNECTION_FAILED"
}

// checkNoSubmitAfterProxyWord: a provider request after the word of the task's latest provider task reached it.
func (m *model) checkNoSubmitAfterProxyWord() {
	if n := len(m.tasks); n > 0 {
		last := m.tasks[n-1]
		if last.word != "" && !last.wordAt.IsZero() && !last.discarded && !m.env.Now().Before(last.wordAt.Add(m.backlog)) {
			m.fail("no-submit-after-proxy-word", "a provider request at %v, after %s answered %s at %v",
				m.env.Now().Sub(m.epoch), last.id, last.word, last.wordAt.Sub(m.epoch))
		}
	}
}

// checkProxyRejected: ProxyRejected comes of a proxy word, and names the host without the password.
func (m *model) checkProxyRejected(err error) {
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != captchaflow.FailureProxyRejected {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	worded := false
	for _, t := range m.tasks {
		worded = worded || t.word != "" && !t.wordAt.IsZero()
	}
	if !worded {
		m.fail("proxy-rejected-has-a-word", "failed %v, though no provider answered a proxy word", err)
	}
	if msg := app.Message(); !containsAll(msg, "203.0.113.9") || containsAll(msg, modelProxyPassword) {
		m.fail("proxy-rejected-has-a-word", "the message %q does not name the host, or shows the password", msg)
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
