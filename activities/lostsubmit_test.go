package activities

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/captchaflow/captchaflow/providers"
	"github.com/captchaflow/captchaflow/providers/callback"
)

// #10 §6: an in.php request that failed after it was written is FailureSubmitOutcomeUnknown (the workflow's policy
// does not retry it); one that never left (connection refused, DNS, TLS) stays a retried ProviderTransient.
func TestSubmitClassifiesLostAnswers(t *testing.T) {
	env, acts, provider, _ := providerEnv(t)
	req := SubmitRequest{Method: "userrecaptcha", Params: map[string]string{}, RunID: "run-1", Submission: 1}

	provider.submitErr = &providers.Error{Op: "submit", Class: callback.ClassTransient, Written: true, Err: errors.New("EOF")}
	_, err := env.ExecuteActivity(acts.Submit, req)
	appErr := appError(t, err)
	assert.Equal(t, FailureSubmitOutcomeUnknown, appErr.Type())
	assert.False(t, appErr.NonRetryable(), "an older workflow's policy still retries it, as before")
	assert.Contains(t, appErr.Message(), "EOF")

	// #15 §1: a gateway's 5xx after forwarding the request (the task exists at the provider) is the same.
	for _, status := range []int{500, 502, 503, 504, 520, 524} {
		provider.submitErr = &providers.Error{Op: "submit", Class: callback.ClassTransient, HTTPStatus: status, Written: true,
			Err: errors.New("Bad Gateway")}
		_, err = env.ExecuteActivity(acts.Submit, req)
		assert.Equal(t, FailureSubmitOutcomeUnknown, appError(t, err).Type(), "HTTP %d", status)
	}
	// A 4xx was refused before anything was done.
	provider.submitErr = &providers.Error{Op: "submit", Class: callback.ClassTransient, HTTPStatus: 429, Written: true}
	_, err = env.ExecuteActivity(acts.Submit, req)
	assert.Equal(t, FailureProviderTransient, appError(t, err).Type())

	provider.submitErr = transportError("submit")
	_, err = env.ExecuteActivity(acts.Submit, req)
	assert.Equal(t, FailureProviderTransient, appError(t, err).Type(), "connection refused: known not sent")

	// An answer with a code is a known outcome even if the request was written (it always is then).
	provider.submitErr = &providers.Error{Op: "submit", Code: "ERROR_NO_SLOT_AVAILABLE", Class: callback.ClassTransient, Written: true}
	_, err = env.ExecuteActivity(acts.Submit, req)
	assert.Equal(t, FailureProviderTransient, appError(t, err).Type())
	assert.NotContains(t, NonRetryableProviderErrors, FailureSubmitOutcomeUnknown, "the workflow decides, per retry policy")
}
