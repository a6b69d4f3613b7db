package providers

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/providers/callback"
)

// createAt is createTask's submitFunc (outcome_test.go).
func createAt(t *testing.T, base string, timeout time.Duration, opts ...Option) error {
	t.Helper()
	c, err := NewCreateTask(callback.AntiCaptcha, base, testKey, append([]Option{WithTimeout(timeout)}, opts...)...)
	require.NoError(t, err)
	_, _, err = c.Submit(context.Background(), "userrecaptcha", recaptchaParams, "https://hooks.example/cb")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), testKey)
	return err
}

// A gateway in front of the provider forwards createTask (the task is created and charged) and answers a 5xx page
// instead of the provider's answer: the outcome is unknown, by the in.php client's rule (OutcomeUnknown).
// A caller retries at once only a known transient failure, so no task may be created twice. A 5xx carrying the
// provider's own envelope is its answer: known.
func TestCreateGatewayErrorAfterCreateIsPaidOnce(t *testing.T) {
	const tasks = 6
	for _, status := range []int{500, 502, 504, 520} {
		p := newFake(t, ctAlways(status, `<html><h1>Gateway Timeout</h1></html>`))
		twice := 0
		for range tasks {
			before := len(p.requests())
			err := createAt(t, p.srv.URL, 5*time.Second)
			if !OutcomeUnknown(err) && ClassOf(err) == callback.ClassTransient {
				_ = createAt(t, p.srv.URL, 5*time.Second) // what the activity's retry policy does with it
			}
			if len(p.requests())-before > 1 {
				twice++
			}
		}
		assert.Zero(t, twice, "HTTP %d: tasks created twice, of %d", status, tasks)
	}
	p := newFake(t, ctAlways(503, `{"errorId":1,"errorCode":"ERROR_SERVICE_UNAVALIABLE","errorDescription":"busy"}`))
	err := createAt(t, p.srv.URL, 5*time.Second)
	assert.False(t, OutcomeUnknown(err), "the provider's own answer on a 5xx: %v", err)
}
