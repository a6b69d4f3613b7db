package providers

import (
	"github.com/captchaflow/captchaflow"

	"github.com/captchaflow/captchaflow/providers/callback"

	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requireInvalidAnswer checks err is the typed refusal of a success answer: a *Error of class unknown (the
// activities make it a non-retryable ProviderUnknown failure) wrapping ErrInvalidAnswer, without the key.
func requireInvalidAnswer(t *testing.T, err error, op string) *Error {
	t.Helper()
	var ce *Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, callback.ClassUnknown, ce.Class)
	assert.Equal(t, op, ce.Op)
	assert.ErrorIs(t, err, ErrInvalidAnswer)
	assert.NotContains(t, err.Error(), testKey)
	return ce
}

func TestSubmitRefusesATaskIDThatIsNotAnID(t *testing.T) {
	for name, body := range map[string]string{
		"json empty":        `{"status":1,"request":""}`,
		"plain empty":       "OK|",
		"bare OK":           "OK",
		"json null":         `{"status":1,"request":null}`,
		"object":            `{"status":1,"request":{"id":"7354961212"}}`,
		"array":             `{"status":1,"request":[7354961212]}`,
		"fraction":          `{"status":1,"request":73549.5}`,
		"negative":          `{"status":1,"request":-7354961212}`,
		"spaces":            "OK|7354 961212",
		"path":              "OK|../../res.php?action=getbalance",
		"query":             `{"status":1,"request":"1&action=reportbad"}`,
		"newline":           `{"status":1,"request":"1\nX-Injected: 1"}`,
		"unicode digits":    "OK|７３５４",
		"html":              "OK|<script>alert(1)</script>",
		"too long":          "OK|" + strings.Repeat("7", 64+1),
		"key echoed back":   "OK|" + testKey + "!",
		"status word in id": `{"status":1,"request":"ERROR WRONG"}`,
	} {
		t.Run(name, func(t *testing.T) {
			p := newFakeProvider(t, always(200, body))
			id, _, err := p.client(t).Submit(context.Background(), "hcaptcha", map[string]string{"sitekey": "s"}, "")
			requireInvalidAnswer(t, err, "submit")
			assert.Empty(t, id)
		})
	}
}

func TestSubmitAcceptsTaskIDs(t *testing.T) {
	for body, want := range map[string]string{
		`{"status":1,"request":"7354961212"}`:        "7354961212",
		`{"status":1,"request":7354961212}`:          "7354961212",
		"OK|7354961212":                              "7354961212",
		"OK|" + strings.Repeat("9", 64):              strings.Repeat("9", 64),
		`{"status":1,"request":"a1B2-c3_D4"}`:        "a1B2-c3_D4",
		`{"status":"1","request":"12345678"}`:        "12345678",
		"  OK|7354961212\r\n":                        "7354961212",
		`{"status":1,"request":"7354961212"}` + "\n": "7354961212",
	} {
		p := newFakeProvider(t, always(200, body))
		id, _, err := p.client(t).Submit(context.Background(), "hcaptcha", map[string]string{"sitekey": "s"}, "")
		require.NoError(t, err, body)
		assert.Equal(t, want, id, body)
	}
}

func TestGetRefusesAnEmptyCode(t *testing.T) {
	for _, body := range []string{`{"status":1,"request":""}`, `{"status":1,"request":null}`, "OK|", "OK"} {
		p := newFakeProvider(t, always(200, body))
		code, err := p.client(t).Get(context.Background(), "7354961212")
		requireInvalidAnswer(t, err, "get")
		assert.Empty(t, code, body)
	}
}

func TestGetRefusesACodeOverTheBound(t *testing.T) {
	big := strings.Repeat("x", captchaflow.MaxCodeBytes+1)
	for name, body := range map[string]string{
		"json":  `{"status":1,"request":"` + big + `"}`,
		"plain": "OK|" + big,
	} {
		t.Run(name, func(t *testing.T) {
			p := newFakeProvider(t, always(200, body))
			code, err := p.client(t).Get(context.Background(), "7354961212")
			ce := requireInvalidAnswer(t, err, "get")
			assert.Empty(t, code)
			assert.Contains(t, ce.Error(), "16385 bytes, over the 16384-byte bound")
			assert.Less(t, len(ce.Error()), 200, "the code itself is not quoted")
		})
	}

	// Exactly at the bound is a code; the bound can be set.
	atBound := strings.Repeat("y", captchaflow.MaxCodeBytes)
	p := newFakeProvider(t, always(200, "OK|"+atBound))
	code, err := p.client(t).Get(context.Background(), "1")
	require.NoError(t, err)
	assert.Equal(t, atBound, code)

	p = newFakeProvider(t, always(200, "OK|0123456789"))
	_, err = p.client(t, withMaxCode(8)).Get(context.Background(), "1")
	requireInvalidAnswer(t, err, "get")
	code, err = p.client(t, withMaxCode(0)).Get(context.Background(), "1")
	require.NoError(t, err, "a non-positive bound keeps the default")
	assert.Equal(t, "0123456789", code)
}

func TestTaskIDPattern(t *testing.T) {
	for _, ok := range []string{"1", "7354961212", "abc-DEF_123", strings.Repeat("z", 64)} {
		assert.True(t, taskIDPattern.MatchString(ok), ok)
	}
	for _, bad := range []string{"", " 1", "1 ", "1.5", "-", "-1", "_a", "a/b", "a%20b", "ü", strings.Repeat("z", 65), "1\x00"} {
		assert.False(t, taskIDPattern.MatchString(bad), "%q", bad)
	}
}

// withMaxCode bounds a solved code below captchaflow.MaxCodeBytes (0 keeps it).
func withMaxCode(n int) Option {
	return func(c *conn) {
		if n > 0 {
			c.maxCode = n
		}
	}
}
