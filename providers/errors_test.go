package providers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestClassifyCode(t *testing.T) {
	tests := map[string]Class{
		"CAPCHA_NOT_READY":               ClassNotReady,
		"CAPTCHA_NOT_READY":              ClassNotReady,
		"ERROR_CAPTCHA_UNSOLVABLE":       ClassResubmit,
		"ERROR_BAD_DUPLICATES":           ClassResubmit,
		"ERROR_NO_SLOT_AVAILABLE":        ClassTransient,
		"ERROR_ZERO_BALANCE":             ClassTransient,
		"MAX_USER_TURN":                  ClassTransient,
		"IP_BANNED":                      ClassTransient,
		"ERROR: 1001":                    ClassTransient,
		"ERROR: 1005":                    ClassTransient,
		"ERROR:1002":                     ClassTransient,
		"ERROR_WRONG_USER_KEY":           ClassConfig,
		"ERROR_KEY_DOES_NOT_EXIST":       ClassConfig,
		"ERROR_PAGEURL":                  ClassConfig,
		"ERROR_GOOGLEKEY":                ClassConfig,
		"ERROR_BAD_TOKEN_OR_PAGEURL":     ClassConfig,
		"ERROR_IP_NOT_ALLOWED":           ClassConfig,
		"ERROR_WRONG_ID_FORMAT":          ClassConfig,
		"ERROR_WRONG_CAPTCHA_ID":         ClassConfig,
		"ERROR_BAD_PARAMETERS":           ClassConfig,
		"ERROR_BAD_PROXY":                ClassConfig,
		"ERROR_WRONG_FILE_EXTENSION":     ClassConfig,
		"ERROR_TOO_BIG_CAPTCHA_FILESIZE": ClassConfig,
		"ERROR_ZERO_CAPTCHA_FILESIZE":    ClassConfig,
		"ERROR_IMAGE_TYPE_NOT_SUPPORTED": ClassConfig,
		"ERROR_UPLOAD":                   ClassConfig,
		"ERROR_CAPTCHAIMAGE_BLOCKED":     ClassConfig,
		"ERROR_EMPTY_ACTION":             ClassConfig,
		"ERROR_WRONG_GOOGLEKEY":          ClassConfig,
		"ERROR_SITEKEY":                  ClassConfig,
		"ERROR_METHOD_CALL":              ClassConfig,
		"ERROR_BAD_TOKEN":                ClassConfig,
		"ERROR_PROXY_FORMAT":             ClassConfig,
		"ERROR_SOMETHING_NEW":            ClassUnknown,
		"ERROR: soon":                    ClassUnknown,
	}
	for code, want := range tests {
		assert.Equal(t, want, classifyCode(code), code)
	}
}

func TestClassifyStatus(t *testing.T) {
	tests := map[int]Class{
		500: ClassTransient, 502: ClassTransient, 503: ClassTransient, 504: ClassTransient,
		429: ClassTransient, 408: ClassTransient,
		401: ClassConfig, 403: ClassConfig,
		400: ClassUnknown, 404: ClassUnknown, 302: ClassUnknown,
	}
	for status, want := range tests {
		assert.Equal(t, want, classifyStatus(status), status)
	}
}

func TestClassOf(t *testing.T) {
	provider := &Error{Op: opGet, Code: "ERROR_CAPTCHA_UNSOLVABLE", Class: ClassResubmit}
	assert.Equal(t, Class(""), ClassOf(nil))
	assert.Equal(t, ClassResubmit, ClassOf(provider))
	assert.Equal(t, ClassResubmit, ClassOf(fmt.Errorf("activity: %w", provider)))
	assert.Equal(t, ClassTransient, ClassOf(context.Canceled))
	assert.Equal(t, ClassTransient, ClassOf(fmt.Errorf("x: %w", context.DeadlineExceeded)))
	assert.Equal(t, ClassTransient, ClassOf(&net.OpError{Op: "dial", Err: errors.New("refused")}))
	assert.Equal(t, ClassUnknown, ClassOf(errors.New("boom")))
}

func TestErrorMessage(t *testing.T) {
	tests := []struct {
		err  *Error
		want string
	}{
		{&Error{Op: opGet, Code: "CAPCHA_NOT_READY", Class: ClassNotReady}, "captchaai get: CAPCHA_NOT_READY (not_ready)"},
		{&Error{Op: opSubmit, Code: "ERROR_NEW", Class: ClassUnknown, Err: errors.New("detail")}, "captchaai submit: ERROR_NEW: detail (unknown)"},
		{&Error{Op: opGetBalance, HTTPStatus: 503, Class: ClassTransient, Err: errors.New("Service Unavailable")}, "captchaai getbalance: HTTP 503: Service Unavailable (transient)"},
		{&Error{Op: opReportBad, Class: ClassTransient, Err: errors.New("dial failed")}, "captchaai reportbad: dial failed (transient)"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.err.Error())
	}
	var nilErr *Error
	assert.NotPanics(t, func() { _ = nilErr.Error(); _ = nilErr.Unwrap() })
}
