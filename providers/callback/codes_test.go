package callback

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestRetryAfter(t *testing.T) {
	tests := map[string]time.Duration{
		"ERROR_NO_SLOT_AVAILABLE":     5 * time.Second,
		"MAX_USER_TURN":               10 * time.Second,
		"ERROR_TOO_MUCH_REQUESTS":     10 * time.Second,
		"ERROR_ZERO_BALANCE":          60 * time.Second,
		"IP_BANNED":                   5 * time.Minute,
		" error_no_slot_available\n":  5 * time.Second, // spacing and case, as ClassifyCode
		"ERROR_SERVER_ERROR":          0,               // transient, but no documented wait: the caller's backoff
		"ERROR_INTERNAL_SERVER_ERROR": 0,
		"TOO_MANY_BAD_IMAGES":         0,
		"ERROR: 1001":                 0,
		"CAPCHA_NOT_READY":            0, // the poll interval spaces these
		"ERROR_CAPTCHA_UNSOLVABLE":    0,
		"ERROR_WRONG_USER_KEY":        0,
		"ERROR_SOMETHING_NEW":         0,
		"":                            0,
	}
	for code, want := range tests {
		assert.Equal(t, want, RetryAfter(code), "%q", code)
	}
}

func TestRetryAfterCodesAreTransient(t *testing.T) {
	for code, wait := range waits {
		assert.Equal(t, ClassTransient, ClassifyCode(code), "%s has a wait, so it must be retried", code)
		assert.Positive(t, wait, code)
		assert.LessOrEqual(t, wait, 5*time.Minute, "%s: a wait longer than a task's default deadline is a typo", code)
	}
}

func TestKnownCode(t *testing.T) {
	for code := range codes {
		got, ok := KnownCode(code)
		assert.True(t, ok, code)
		assert.Equal(t, code, got)
	}
	got, ok := KnownCode(" capcha_not_ready ")
	assert.True(t, ok)
	assert.Equal(t, "CAPCHA_NOT_READY", got, "canonical spelling")
	for _, code := range []string{"", "OK", "ERROR_SOMETHING_NEW", "ERROR: 1001", "ERROR_NO_SLOT_AVAILABLE_X", "03AGdBq2"} {
		got, ok := KnownCode(code)
		assert.False(t, ok, "%q", code)
		assert.Empty(t, got, "%q", code)
	}
}
