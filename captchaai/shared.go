package captchaai

import (
	"net/http"
	"time"
)

// The createTask client (package createtask) speaks another wire protocol to the same kind of providers and returns
// this package's *Error, so that the activities treat both protocols alike. The helpers below are the parts of this
// client it shares, exported so that each rule stays declared once.

// MaxAnswerBytes bounds what a provider client reads from one answer.
const MaxAnswerBytes = maxAnswerBytes

// MaxCodeLen and MaxErrorTextLen bound a provider-supplied code and error text in an *Error.
const (
	MaxCodeLen      = maxCodeLen
	MaxErrorTextLen = maxErrorTextLen
)

// NewHTTPClient is the transport every provider client uses: its own pool, every phase bounded by timeout.
func NewHTTPClient(timeout time.Duration) *http.Client { return newHTTPClient(timeout, nil) }

// CloseBody drains a bounded amount of body so the keep-alive connection can be reused, then closes it.
var CloseBody = closeBody

// RedactError returns err with every trace of apiKey removed (see redactError).
func RedactError(err error, apiKey string) error { return redactError(err, apiKey) }

// RedactText removes apiKey from provider-supplied text.
func RedactText(s, apiKey string) string { return redactText(s, apiKey) }

// Truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func Truncate(s string, n int) string { return truncate(s, n) }

// Send does req on h as this client does: a failure is a transient *Error, Written unless provably not one byte of
// the request left (see send). Its cause is not redacted yet.
func Send(h *http.Client, op string, req *http.Request) (*http.Response, *Error) {
	return send(h, op, req)
}

// UnansweredStatus is the *Error for a non-2xx status whose body is not the provider's own answer: a 5xx is
// outcome unknown (see unansweredStatus).
func UnansweredStatus(op string, status int) *Error { return unansweredStatus(op, status) }

// Snippet quotes the start of an unparseable body for diagnostics (at most 64 bytes).
func Snippet(b []byte) string { return snippet(b) }

// DecodeImage decodes the base64 image a caller passes (standard or URL-safe, padded or not, with or without a data:
// URI prefix), as in.php method "post" accepts it.
func DecodeImage(encoded string) ([]byte, error) { return decodeImage(encoded) }
