package providers

import (
	"github.com/captchaflow/captchaflow/providers/callback"

	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// The fuzz targets feed arbitrary provider answers to the parsers and to the client. Seeds live in
// testdata/fuzz/<target>/ (real answers of both wire forms, and the odd ones the tests cover); run one with
//
//	go test -run '^$' -fuzz '^FuzzParseAnswerText$' -fuzztime 2m ./providers/
//
// or every target with make fuzz. A crasher lands in testdata/fuzz/<target>/ and then runs as a plain test.

// maxParseErrorLen bounds a parse error's message: a snippet of at most 64 bytes, quoted (each byte at
// most \u00XX or \xXX, 6 characters), plus the fixed text.
const maxParseErrorLen = 6*64 + 128

// checkAnswer holds the invariants every parse must keep, whatever the input.
func checkAnswer(t *testing.T, body []byte, ans answer, err error) {
	t.Helper()
	if err != nil {
		if !errors.Is(err, callback.ErrMalformed) {
			t.Fatalf("parse error %q does not wrap callback.ErrMalformed", err)
		}
		if n := len(err.Error()); n > maxParseErrorLen {
			t.Fatalf("parse error of %d bytes for a %d-byte body", n, len(body))
		}
		if !reflect.DeepEqual(ans, answer{}) {
			t.Fatalf("error with a non-zero answer %+v", ans)
		}
		return
	}
	if ans.OK {
		if ans.Code != "" || ans.ErrorText != "" {
			t.Fatalf("success carrying an error code: %+v", ans)
		}
	} else if ans.Code == "" {
		t.Fatalf("failure without a code: %+v", ans)
	}
	// Decoding only shrinks text, except that each invalid UTF-8 byte in a JSON string becomes U+FFFD (3 bytes).
	if len(ans.Value)+len(ans.Code)+len(ans.ErrorText) > 3*len(body) {
		t.Fatalf("answer %+v is longer than its %d-byte body allows", ans, len(body))
	}
}

// FuzzParseAnswerText: plain-text answers (OK|value, status words, bare numbers).
func FuzzParseAnswerText(f *testing.F) {
	f.Fuzz(func(t *testing.T, body string) {
		ans, err := parseAnswer([]byte(body))
		checkAnswer(t, []byte(body), ans, err)
		trimmed := strings.TrimSpace(body)
		if err != nil || strings.HasPrefix(trimmed, "{") {
			return
		}
		switch {
		case ans.OK && strings.HasPrefix(trimmed, "OK|"):
			if ans.Value != trimmed[len("OK|"):] {
				t.Fatalf("OK| answer %q parsed to value %q", trimmed, ans.Value)
			}
		case !ans.OK:
			if ans.Code != trimmed || !callback.IsCode(ans.Code) {
				t.Fatalf("status word %q parsed to code %q", trimmed, ans.Code)
			}
		}
	})
}

// FuzzParseAnswerJSON: json=1 answers. Besides the invariants, a string "request" must come out exactly as
// encoding/json decodes it (the parser cuts the quotes itself when there is no escape).
func FuzzParseAnswerJSON(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		ans, err := parseAnswer(body)
		checkAnswer(t, body, ans, err)
		if err != nil || bytes.IndexByte(bytes.TrimSpace(body), '{') != 0 {
			return
		}
		var ref struct {
			Request json.RawMessage `json:"request"`
		}
		if json.Unmarshal(body, &ref) != nil {
			t.Fatalf("parsed %q although encoding/json refuses it", body)
		}
		var want string
		if len(ref.Request) > 0 && ref.Request[0] == '"' {
			if err := json.Unmarshal(ref.Request, &want); err != nil {
				t.Fatal(err)
			}
			got := ans.Value
			if !ans.OK {
				got = ans.Code
			}
			if got != want {
				t.Fatalf("request %s parsed to %q, encoding/json says %q", ref.Request, got, want)
			}
		}
	})
}

// answerTransport answers every request with one body, in memory.
type answerTransport []byte

func (b answerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: http.StatusOK,
		Header:     http.Header{"Content-Type": {"text/plain"}},
		Body:       io.NopCloser(bytes.NewReader(b)),
		Request:    req,
	}, nil
}

// FuzzClientAnswer runs an answer through Submit and Get as the activities see it: either a *Error of a known
// class that does not contain the key, or a task id that taskIDPattern accepts and a code that is non-empty and within
// the bound — never anything else.
func FuzzClientAnswer(f *testing.F) {
	const maxCode = 256
	classes := map[callback.Class]bool{callback.ClassConfig: true, callback.ClassTransient: true, callback.ClassResubmit: true, callback.ClassNotReady: true, callback.ClassUnknown: true}
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := NewInPHP("https://provider.invalid", testKey,
			WithHTTPClient(&http.Client{Transport: answerTransport(body)}), withMaxCode(maxCode), WithResultBatching(-1)) // a lone Get
		if err != nil {
			t.Fatal(err)
		}
		checkErr := func(err error) {
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a *Error", err)
			}
			if !classes[ce.Class] {
				t.Fatalf("error %v has class %q", err, ce.Class)
			}
			if strings.Contains(err.Error(), testKey) {
				t.Fatalf("error %q contains the key", err)
			}
			if len(ce.Code) > maxCodeLen+len("...") {
				t.Fatalf("error code of %d bytes", len(ce.Code))
			}
		}
		id, _, err := c.Submit(context.Background(), "hcaptcha", map[string]string{"sitekey": "s"}, "")
		if err != nil {
			checkErr(err)
		} else if !taskIDPattern.MatchString(id) {
			t.Fatalf("Submit returned %q, not a task id", id)
		}
		code, err := c.Get(context.Background(), "7354961212")
		if err != nil {
			checkErr(err)
		} else if code == "" || len(code) > maxCode {
			t.Fatalf("Get returned a %d-byte code", len(code))
		}
	})
}
