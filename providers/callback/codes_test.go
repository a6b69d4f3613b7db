package callback

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
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
	for code, wait := range retryAfter {
		assert.Equal(t, ClassTransient, ClassifyCode(code), "%s has a wait, so it must be retried", code)
		assert.Positive(t, wait, code)
		assert.LessOrEqual(t, wait, 5*time.Minute, "%s: a wait longer than a task's default deadline is a typo", code)
	}
}

func TestKnownCode(t *testing.T) {
	for code := range codeClasses {
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

func TestIsTransportError(t *testing.T) {
	dial := &url.Error{Op: "Post", URL: "https://ocr.captchaai.com/in.php",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"dial refused", &Error{Op: "submit", Class: ClassTransient, Err: dial}, true},
		{"client timeout", &Error{Op: "get", Class: ClassTransient, Err: fmt.Errorf("Get: %w", context.DeadlineExceeded)}, true},
		{"body cut off", &Error{Op: "get", Class: ClassTransient, Err: fmt.Errorf("read answer: %w", errors.New("unexpected EOF"))}, true},
		{"bare deadline", context.DeadlineExceeded, true},
		{"bare net error", &net.DNSError{Err: "no such host", Name: "ocr.captchaai.com", IsTimeout: true}, true},
		{"provider code", &Error{Op: "submit", Code: "ERROR_NO_SLOT_AVAILABLE", Class: ClassTransient}, false},
		{"HTTP 502", &Error{Op: "submit", Class: ClassTransient, HTTPStatus: 502, Err: errors.New("Bad Gateway")}, false},
		{"malformed answer", &Error{Op: "get", Class: ClassTransient, Err: fmt.Errorf("%w: empty body", errMalformed)}, false},
		{"invalid answer", &Error{Op: "submit", Class: ClassUnknown, Err: fmt.Errorf("%w: no id", ErrInvalidAnswer)}, false},
		{"request not built", &Error{Op: "submit", Class: ClassConfig, Err: errors.New("build request")}, false},
		{"some other error", errors.New("boom"), false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, IsTransportError(tt.err), tt.name)
	}
}
