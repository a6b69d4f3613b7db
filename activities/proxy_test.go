package activities

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/providers"
	"github.com/captchaflow/captchaflow/providers/callback"
)

func proxiedReq() SubmitRequest {
	r := recaptchaReq
	r.Params = map[string]string{"googlekey": "k", "pageurl": "https://x.example", "proxy": "login:hunter2@203.0.113.7:3128", "proxytype": "HTTP"}
	return r
}

// A provider's proxy word ends the Submit ProxyRejected, naming the word and the host, never the password (nor the
// provider's own text, which may quote the proxy): no other provider is asked with the same proxy.
func TestAProxyRefusalIsNotFailedOver(t *testing.T) {
	for _, code := range []string{"ERROR_BAD_PROXY", "ERROR_PROXY_CONNECTION_FAILED", "ERROR_PROXY_BANNED", "ERROR_PROXY_NOT_AUTHORISED"} {
		env, acts, fakes, _ := routedEnv(t)
		fakes["a"].submitErr = &providers.Error{Op: "submit", Code: code, Class: callback.ClassifyCode(code),
			Err: assert.AnError, Provider: "captchaai"}
		_, err := submitResult(t, env, acts, proxiedReq())
		appErr := appError(t, err)
		assert.Equal(t, captchaflow.FailureProxyRejected, appErr.Type(), code)
		assert.True(t, appErr.NonRetryable(), code)
		assert.Contains(t, appErr.Message(), code)
		assert.Contains(t, appErr.Message(), "203.0.113.7")
		assert.NotContains(t, appErr.Message(), "hunter2")
		assert.Empty(t, fakes["b"].pingbacks, "%s: not failed over with the same proxy", code)
		assert.Empty(t, fakes["c"].pingbacks, code)
		assert.False(t, acts.Providers.Breaker.IsOpen("a"), "%s: the user's proxy says nothing of the provider", code)
	}
}

// A poll's proxy word is ProxyRejected too; ERROR_PROXY_MISSING is captchaflow's bug and says so.
func TestPolledProxyWordsAndTheMissingProxyBug(t *testing.T) {
	env, acts, provider, _ := providerEnv(t)
	provider.getErr = &providers.Error{Op: "get", Code: "ERROR_PROXY_READ_TIMEOUT", Class: callback.ClassProxy}
	_, err := env.ExecuteActivity(acts.Poll, PollRequest{ProviderTaskID: "1"})
	assert.Equal(t, captchaflow.FailureProxyRejected, appError(t, err).Type())
	provider.getErr = nil
	provider.submitErr = &providers.Error{Op: "createTask", Code: callback.CodeProxyMissing, Class: callback.ClassConfig}
	_, err = env.ExecuteActivity(acts.Submit, proxiedReq())
	appErr := appError(t, err)
	assert.Equal(t, captchaflow.FailureProviderConfig, appErr.Type())
	assert.Contains(t, appErr.Message(), "captchaflow bug")
}

func TestProxyRejectedNamesTheUserAgentForItsWord(t *testing.T) {
	params := map[string]string{"proxy": "u:hunter2@203.0.113.7:80", "userAgent": "UA/1"}
	msg := appError(t, ProxyRejected(callback.CodeWrongUA, params)).Message()
	assert.Contains(t, msg, `"UA/1"`)
	assert.NotContains(t, msg, "hunter2")
	require.Contains(t, appError(t, ProxyRejected("ERROR_PROXY_BANNED", params)).Message(), "host 203.0.113.7")
}

// A provider that refused a proxied task's type is not asked for proxied ones a while, but still for proxyless ones.
func TestAProxiedTypeRefusalBarsNoProxylessTask(t *testing.T) {
	env, acts, fakes, _ := routedEnv(t)
	fakes["a"].submitErr = &providers.Error{Op: "submit", Code: "ERROR_TASK_NOT_SUPPORTED", Class: callback.ClassUnsupported}
	_, err := submitResult(t, env, acts, proxiedReq())
	assert.Equal(t, FailureProviderUnsupported, appError(t, err).Type())
	fakes["a"].submitErr = nil
	r, err := submitResult(t, env, acts, proxiedReq())
	require.NoError(t, err)
	assert.Equal(t, "b", r.Provider, "a lacks the proxied type now")
	r, err = submitResult(t, env, acts, recaptchaReq)
	require.NoError(t, err)
	assert.Equal(t, "a", r.Provider, "the proxyless task still goes to a")
}
