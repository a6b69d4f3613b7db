package captchaflow

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTokenFreshnessFieldsDecodeAndDefault(t *testing.T) {
	in := decode(t, `{"method":"turnstile","params":{"sitekey":"k","pageurl":"https://e.com"}}`)
	require.NoError(t, in.Validate())
	require.NotNil(t, in.MaxRefreshes)
	assert.Equal(t, DefaultMaxRefreshes, *in.MaxRefreshes)
	assert.Equal(t, 1, in.Refreshes())
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	assert.Equal(t, at.Add(300*time.Second), in.ExpiresAt(at))

	in = decode(t, `{"method":"turnstile","params":{"sitekey":"k","pageurl":"https://e.com"},"max_refreshes":0,"token_ttl_seconds":90}`)
	require.NoError(t, in.Validate())
	assert.Equal(t, 0, in.Refreshes(), "an explicit 0 turns refreshing off; it is not the default")
	assert.Equal(t, at.Add(90*time.Second), in.ExpiresAt(at))

	in = decode(t, `{"method":"base64","params":{"body":"aGk="}}`)
	assert.True(t, in.ExpiresAt(time.Now()).IsZero(), "an image code does not expire")
	in.TokenTTLSeconds = 30
	assert.Equal(t, at.Add(30*time.Second), in.ExpiresAt(at))
}

func TestTokenFreshnessFieldsValidated(t *testing.T) {
	for js, want := range map[string]string{
		`{"method":"custom","params":{"a":"b"},"token_ttl_seconds":-1}`:    "token_ttl_seconds: -1 is out of range [10, 86400]",
		`{"method":"custom","params":{"a":"b"},"token_ttl_seconds":9}`:     "token_ttl_seconds: 9 is out of range [10, 86400]",
		`{"method":"custom","params":{"a":"b"},"token_ttl_seconds":86401}`: "token_ttl_seconds",
		`{"method":"custom","params":{"a":"b"},"token_ttl_seconds":"120"}`: "token_ttl_seconds: must be an integer",
		`{"method":"custom","params":{"a":"b"},"max_refreshes":-1}`:        "max_refreshes: -1 is out of range [0, 5]",
		`{"method":"custom","params":{"a":"b"},"max_refreshes":6}`:         "max_refreshes: 6 is out of range",
		`{"method":"custom","params":{"a":"b"},"max_refreshes":"1"}`:       "max_refreshes: must be an integer",
		`{"method":"custom","params":{"a":"b"},"max_refreshes":1.5}`:       "max_refreshes",
	} {
		err := decode(t, js).Validate()
		if assert.Error(t, err, js) {
			assert.Contains(t, err.Error(), want, js)
		}
	}
	for _, ok := range []string{
		`{"method":"custom","params":{"a":"b"},"max_refreshes":5,"token_ttl_seconds":10}`,
		`{"method":"custom","params":{"a":"b"},"max_refreshes":0,"token_ttl_seconds":86400}`,
	} {
		assert.NoError(t, decode(t, ok).Validate(), ok)
	}
}

// TestResultAndStatusCarryTokenTimes: the JSON names the contract promises, and no expires_at for a code that
// does not expire.
func TestResultAndStatusCarryTokenTimes(t *testing.T) {
	at := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	js, err := json.Marshal(Result{Code: "x", ReceivedAt: at, ExpiresAt: at.Add(2 * time.Minute), Refreshes: 1})
	require.NoError(t, err)
	assert.Contains(t, string(js), `"expires_at":"2026-12-01T03:02:00Z"`)
	assert.Contains(t, string(js), `"refreshes":1`)
	js, err = json.Marshal(Result{Code: "x", ReceivedAt: at})
	require.NoError(t, err)
	assert.NotContains(t, string(js), "expires_at")
	assert.NotContains(t, string(js), "refreshes")
	js, err = json.Marshal(Status{Phase: PhaseDelivering, ReceivedAt: at, ExpiresAt: at.Add(time.Minute), TokenAgeSeconds: 12.5})
	require.NoError(t, err)
	assert.Contains(t, string(js), `"received_at":"2026-12-01T03:00:00Z"`)
	assert.Contains(t, string(js), `"token_age_seconds":12.5`)
	assert.Equal(t, FailureTokenExpired, "TokenExpired")
	for method, ttl := range map[string]time.Duration{"userrecaptcha": 120 * time.Second, "turnstile": 300 * time.Second,
		"hcaptcha": 120 * time.Second, "base64": 0, "post": 0, "textcaptcha": 0} {
		assert.Equal(t, ttl, TokenLifetimes[method], method)
	}
}
