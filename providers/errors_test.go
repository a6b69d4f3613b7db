package providers

import (
	"github.com/captchaflow/captchaflow/providers/callback"

	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestClassifyCode(t *testing.T) {
	tests := map[string]callback.Class{
		"CAPCHA_NOT_READY":               callback.ClassNotReady,
		"CAPTCHA_NOT_READY":              callback.ClassNotReady,
		"ERROR_CAPTCHA_UNSOLVABLE":       callback.ClassResubmit,
		"ERROR_BAD_DUPLICATES":           callback.ClassResubmit,
		"ERROR_NO_SLOT_AVAILABLE":        callback.ClassTransient,
		"ERROR_ZERO_BALANCE":             callback.ClassTransient,
		"MAX_USER_TURN":                  callback.ClassTransient,
		"IP_BANNED":                      callback.ClassTransient,
		"ERROR: 1001":                    callback.ClassTransient,
		"ERROR: 1005":                    callback.ClassTransient,
		"ERROR:1002":                     callback.ClassTransient,
		"ERROR_WRONG_USER_KEY":           callback.ClassConfig,
		"ERROR_KEY_DOES_NOT_EXIST":       callback.ClassConfig,
		"ERROR_PAGEURL":                  callback.ClassConfig,
		"ERROR_GOOGLEKEY":                callback.ClassConfig,
		"ERROR_BAD_TOKEN_OR_PAGEURL":     callback.ClassConfig,
		"ERROR_IP_NOT_ALLOWED":           callback.ClassConfig,
		"ERROR_WRONG_ID_FORMAT":          callback.ClassConfig,
		"ERROR_WRONG_CAPTCHA_ID":         callback.ClassConfig,
		"ERROR_BAD_PARAMETERS":           callback.ClassConfig,
		"ERROR_BAD_PROXY":                callback.ClassProxy,
		"ERROR_PROXY_CONNECTION_FAILED":  callback.ClassProxy,
		"ERROR_PROXY_CONNECT_REFUSED":    callback.ClassProxy,
		"ERROR_PROXY_CONNECT_TIMEOUT":    callback.ClassProxy,
		"ERROR_PROXY_READ_TIMEOUT":       callback.ClassProxy,
		"ERROR_PROXY_BANNED":             callback.ClassProxy,
		"ERROR_PROXY_TRANSPARENT":        callback.ClassProxy,
		"ERROR_PROXY_NOT_AUTHORISED":     callback.ClassProxy,
		"ERROR_WRONG_USERAGENT":          callback.ClassProxy,
		"ERROR_PROXY_MISSING":            callback.ClassConfig,
		"ERROR_WRONG_FILE_EXTENSION":     callback.ClassConfig,
		"ERROR_TOO_BIG_CAPTCHA_FILESIZE": callback.ClassConfig,
		"ERROR_ZERO_CAPTCHA_FILESIZE":    callback.ClassConfig,
		"ERROR_IMAGE_TYPE_NOT_SUPPORTED": callback.ClassConfig,
		"ERROR_UPLOAD":                   callback.ClassConfig,
		"ERROR_CAPTCHAIMAGE_BLOCKED":     callback.ClassConfig,
		"ERROR_EMPTY_ACTION":             callback.ClassConfig,
		"ERROR_WRONG_GOOGLEKEY":          callback.ClassConfig,
		"ERROR_SITEKEY":                  callback.ClassConfig,
		"ERROR_METHOD_CALL":              callback.ClassConfig,
		"ERROR_BAD_TOKEN":                callback.ClassConfig,
		"ERROR_PROXY_FORMAT":             callback.ClassConfig,
		"ERROR_SOMETHING_NEW":            callback.ClassUnknown,
		"ERROR: soon":                    callback.ClassUnknown,
	}
	for code, want := range tests {
		assert.Equal(t, want, callback.ClassifyCode(code), code)
	}
}

func TestClassifyStatus(t *testing.T) {
	tests := map[int]callback.Class{
		500: callback.ClassTransient, 502: callback.ClassTransient, 503: callback.ClassTransient, 504: callback.ClassTransient,
		429: callback.ClassTransient, 408: callback.ClassTransient,
		401: callback.ClassConfig, 403: callback.ClassConfig,
		400: callback.ClassUnknown, 404: callback.ClassUnknown, 302: callback.ClassUnknown,
	}
	for status, want := range tests {
		assert.Equal(t, want, classifyStatus(status), status)
	}
}

func TestClassOf(t *testing.T) {
	provider := &Error{Op: "get", Code: "ERROR_CAPTCHA_UNSOLVABLE", Class: callback.ClassResubmit}
	assert.Equal(t, callback.Class(""), ClassOf(nil))
	assert.Equal(t, callback.ClassResubmit, ClassOf(provider))
	assert.Equal(t, callback.ClassResubmit, ClassOf(fmt.Errorf("activity: %w", provider)))
	assert.Equal(t, callback.ClassTransient, ClassOf(context.Canceled))
	assert.Equal(t, callback.ClassTransient, ClassOf(fmt.Errorf("x: %w", context.DeadlineExceeded)))
	assert.Equal(t, callback.ClassTransient, ClassOf(&net.OpError{Op: "dial", Err: errors.New("refused")}))
	assert.Equal(t, callback.ClassUnknown, ClassOf(errors.New("boom")))
}

func TestErrorMessage(t *testing.T) {
	tests := []struct {
		err  *Error
		want string
	}{
		{&Error{Provider: "captchaai", Op: "get", Code: "CAPCHA_NOT_READY", Class: callback.ClassNotReady}, "captchaai get: CAPCHA_NOT_READY (not_ready)"},
		{&Error{Provider: "captchaai", Op: "submit", Code: "ERROR_NEW", Class: callback.ClassUnknown, Err: errors.New("detail")}, "captchaai submit: ERROR_NEW: detail (unknown)"},
		{&Error{Provider: "captchaai", Op: "getbalance", HTTPStatus: 503, Class: callback.ClassTransient, Err: errors.New("Service Unavailable")}, "captchaai getbalance: HTTP 503: Service Unavailable (transient)"},
		{&Error{Provider: "captchaai", Op: "reportbad", Class: callback.ClassTransient, Err: errors.New("dial failed")}, "captchaai reportbad: dial failed (transient)"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.err.Error())
	}
}

func TestIsTransportError(t *testing.T) {
	dial := &url.Error{Op: "Post", URL: "https://ocr.providers.com/in.php",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"dial refused", &Error{Op: "submit", Class: callback.ClassTransient, Err: dial}, true},
		{"client timeout", &Error{Op: "get", Class: callback.ClassTransient, Err: fmt.Errorf("Get: %w", context.DeadlineExceeded)}, true},
		{"body cut off", &Error{Op: "get", Class: callback.ClassTransient, Err: fmt.Errorf("read answer: %w", errors.New("unexpected EOF"))}, true},
		{"bare deadline", context.DeadlineExceeded, true},
		{"bare net error", &net.DNSError{Err: "no such host", Name: "ocr.providers.com", IsTimeout: true}, true},
		{"provider code", &Error{Op: "submit", Code: "ERROR_NO_SLOT_AVAILABLE", Class: callback.ClassTransient}, false},
		{"HTTP 502", &Error{Op: "submit", Class: callback.ClassTransient, HTTPStatus: 502, Err: errors.New("Bad Gateway")}, false},
		{"malformed answer", &Error{Op: "get", Class: callback.ClassTransient, Err: fmt.Errorf("%w: empty body", callback.ErrMalformed)}, false},
		{"invalid answer", &Error{Op: "submit", Class: callback.ClassUnknown, Err: fmt.Errorf("%w: no id", ErrInvalidAnswer)}, false},
		{"request not built", &Error{Op: "submit", Class: callback.ClassConfig, Err: errors.New("build request")}, false},
		{"some other error", errors.New("boom"), false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, IsTransportError(tt.err), tt.name)
	}
}

// A rate refusal is the account's words for it or an HTTP 429, whatever the class; anything else is not one.
func TestRateLimited(t *testing.T) {
	for _, c := range []struct {
		err  error
		what string
		ok   bool
	}{
		{&Error{Code: "MAX_USER_TURN", Class: callback.ClassTransient}, "MAX_USER_TURN", true},
		{&Error{Code: "error_too_much_requests"}, "error_too_much_requests", true},
		{&Error{Code: "ERROR_RATE_LIMIT"}, "ERROR_RATE_LIMIT", true},
		{&Error{HTTPStatus: 429}, "HTTP 429", true},
		{&Error{Code: "ERROR_NO_SLOT_AVAILABLE"}, "ERROR_NO_SLOT_AVAILABLE", false},
		{errors.New("dial: refused"), "", false},
		{nil, "", false},
	} {
		if what, ok := RateLimited(c.err); what != c.what || ok != c.ok {
			t.Errorf("%v: got %q %v", c.err, what, ok)
		}
	}
}
