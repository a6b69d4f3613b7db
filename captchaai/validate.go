package captchaai

import (
	"errors"
	"fmt"
)

// A provider's success answer is trusted no further than its shape: the task id it hands out goes into workflow
// history, search attributes and every res.php URL, and the code it returns is the result itself. Answers that
// cannot be what they claim are refused with ErrInvalidAnswer under ClassUnknown (not retried: the provider said
// "OK", so retrying a submission could pay for the task twice, and res.php keeps answering the same for a task).

// DefaultMaxCodeBytes bounds a solved code unless WithMaxCodeBytes says otherwise. It is captchaflow.MaxCodeBytes,
// repeated because this package does not import the contract (which links the Temporal SDK); the worker passes
// the contract's value and a test there keeps the two equal.
const DefaultMaxCodeBytes = 16 << 10

// maxTaskIDLen bounds a task id. CaptchaAI's and 2captcha's ids are 10–12 digits; 64 leaves room for providers
// that use longer or alphanumeric ids.
const maxTaskIDLen = 64

// ErrInvalidAnswer marks a success answer that cannot be what it claims: a task id that is not an id, an empty
// code, a code over the size bound. Such errors are *Error with ClassUnknown.
var ErrInvalidAnswer = errors.New("invalid provider answer")

// WithMaxCodeBytes bounds the size of a solved code Get accepts (default DefaultMaxCodeBytes); a bigger one is an
// ErrInvalidAnswer, never returned. Non-positive values are ignored.
func WithMaxCodeBytes(n int) Option {
	return func(c *Client) {
		if n > 0 {
			c.maxCode = n
		}
	}
}

// IsTaskID reports whether s has the shape of a provider task id: 1–64 characters of [0-9A-Za-z_-], the first a
// letter or digit (so a negative number or an option-like "-x" is not one). The real services hand out digits
// only; the wider set admits compatible providers without admitting anything that could change a URL, a log line
// or a search query.
func IsTaskID(s string) bool {
	if len(s) == 0 || len(s) > maxTaskIDLen || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// checkTaskID refuses an in.php success whose value is not a task id.
func (c *Client) checkTaskID(id string) error {
	if IsTaskID(id) {
		return nil
	}
	if id == "" {
		return c.fail(opSubmit, ClassUnknown, fmt.Errorf("%w: success without a task id", ErrInvalidAnswer))
	}
	return c.fail(opSubmit, ClassUnknown, fmt.Errorf("%w: task id %s is not an id (want 1-%d of [0-9A-Za-z_-])",
		ErrInvalidAnswer, snippet([]byte(redactText(id, c.apiKey))), maxTaskIDLen))
}

// checkCode refuses a res.php success whose value cannot be a solved code: empty, or over the size bound (it
// would bloat workflow history and every place the result goes).
func (c *Client) checkCode(code string) error {
	switch {
	case code == "":
		return c.fail(opGet, ClassUnknown, fmt.Errorf("%w: success without a code", ErrInvalidAnswer))
	case len(code) > c.maxCode:
		return c.fail(opGet, ClassUnknown, fmt.Errorf("%w: the code is %d bytes, over the %d-byte bound",
			ErrInvalidAnswer, len(code), c.maxCode))
	}
	return nil
}
