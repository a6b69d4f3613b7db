package captchaai

import (
	"context"
	"errors"
	"net/url"
	"strings"
)

// redactedMarker replaces the API key wherever it would otherwise leak.
const redactedMarker = "REDACTED"

// redactError returns err with every trace of apiKey removed, so that it can
// be logged, returned and stored in workflow history.
//
// res.php takes the key in the query string and *url.Error prints the full
// URL, so the URL's query and userinfo are stripped first. As a backstop, if
// the key still appears anywhere in the message, the error is replaced by a
// scrubbed copy that keeps only the context sentinels callers classify on.
func redactError(err error, apiKey string) error {
	if err == nil {
		return nil
	}
	if ue, ok := err.(*url.Error); ok {
		err = &url.Error{Op: ue.Op, URL: stripURLSecrets(ue.URL), Err: ue.Err}
	}
	if apiKey == "" || !strings.Contains(err.Error(), apiKey) {
		return err
	}
	return &scrubbedError{
		msg:   strings.ReplaceAll(err.Error(), apiKey, redactedMarker),
		cause: contextCause(err),
	}
}

// redactText removes apiKey from provider-supplied text such as error_text.
func redactText(s, apiKey string) string {
	if apiKey == "" {
		return s
	}
	return strings.ReplaceAll(s, apiKey, redactedMarker)
}

// stripURLSecrets drops the query (which carries key=) and any userinfo.
func stripURLSecrets(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		// Unparseable: cut at the query by hand rather than echo it.
		if i := strings.IndexByte(raw, '?'); i >= 0 {
			return raw[:i]
		}
		return raw
	}
	u.User = nil
	u.RawQuery = ""
	u.ForceQuery = false
	u.Fragment = ""
	u.RawFragment = ""
	return u.String()
}

// contextCause keeps errors.Is(err, context.Canceled/DeadlineExceeded)
// working on a scrubbed error without keeping the leaking chain.
func contextCause(err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return context.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return context.Canceled
	default:
		return nil
	}
}

// scrubbedError is a message-only stand-in for an error whose text contained
// the API key.
type scrubbedError struct {
	msg   string
	cause error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.cause }
