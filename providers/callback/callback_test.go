package callback

import (
	"bytes"
	"errors"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func post(contentType, body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/callback/wf?t=token", strings.NewReader(body))
	r.Header.Set("Content-Type", contentType)
	return r
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		flavor      Flavor
		contentType string
		body        string
		want        Result
	}{
		{"", "application/x-www-form-urlencoded", "id=51555263943&code=ANSWER", Result{"51555263943", "ANSWER"}},
		{TwoCaptcha, "application/x-www-form-urlencoded", "id=51555263943&code=ANSWER", Result{"51555263943", "ANSWER"}},
		{TwoCaptcha, "application/x-www-form-urlencoded", "id=1&code=ERROR_CAPTCHA_UNSOLVABLE", Result{"1", "ERROR_CAPTCHA_UNSOLVABLE"}},
		{CapMonster, "application/json", `{"errorId":0,"status":"ready","solution":{"gRecaptchaResponse":"03A"}}`, Result{"", "03A"}},
		{AntiCaptcha, "application/json", `{"errorId":0,"taskId":7654321,"status":"ready","solution":{"text":"deditur"}}`, Result{"7654321", "deditur"}},
		{CapSolver, "application/json", `{"errorId":1,"errorCode":"ERROR_CAPTCHA_SOLVE_FAILED","taskId":"da450cbc-ff9d","status":"failed"}`,
			Result{"da450cbc-ff9d", "ERROR_CAPTCHA_SOLVE_FAILED"}},
		{CapSolver, "application/json", `{"errorId":1,"errorCode":"error_captcha_solve_failed"}`, Result{"", "ERROR_CAPTCHA_SOLVE_FAILED"}},
	} {
		got, err := Parse(post(tc.contentType, tc.body), tc.flavor)
		require.NoError(t, err, tc.body)
		assert.Equal(t, tc.want, got)
	}
	for _, bad := range []struct {
		flavor   Flavor
		ct, body string
		field    string
	}{
		{TwoCaptcha, "application/json", `{"id":1}`, "id"},
		{TwoCaptcha, "application/x-www-form-urlencoded", "id=1", "code"},
		{"", "application/x-www-form-urlencoded", "id=1'&code=x", "id"},
		{"", "application/x-www-form-urlencoded", "id=1&code=" + strings.Repeat("c", 16<<10+1), "code"},
		{CapMonster, "application/json", `{"status":"ready"}`, "body"},
		{CapMonster, "application/json", `{"errorId":0,"status":"processing"}`, "body"},
		{CapMonster, "application/json", `{"errorId":0,"status":"ready","solution":{}}`, "body"},
		{CapSolver, "application/json", `{"errorId":0,"taskId":"a'b","status":"failed"}`, "taskId"},
		{"nope", "", "", "flavor"},
	} {
		_, err := Parse(post(bad.ct, bad.body), bad.flavor)
		var e *Error
		require.ErrorAs(t, err, &e, bad.body)
		assert.Equal(t, bad.field, e.Field, bad.body)
	}
}

func TestParseReadsTheQueryAndMultipartForms(t *testing.T) {
	got, err := Parse(httptest.NewRequest(http.MethodGet, "/callback?id=7&code=03A", nil), "")
	require.NoError(t, err)
	assert.Equal(t, Result{"7", "03A"}, got)
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	require.NoError(t, w.WriteField("id", "8"))
	require.NoError(t, w.WriteField("code", "body wins"))
	require.NoError(t, w.Close())
	r := httptest.NewRequest(http.MethodPost, "/callback?id=8&code=query", &body)
	r.Header.Set("Content-Type", w.FormDataContentType())
	got, err = Parse(r, "")
	require.NoError(t, err)
	assert.Equal(t, Result{"8", "body wins"}, got)
}

// An error callback is only ever its status word: an errorCode that is not one (a sentence, a bare word) is
// refused, never delivered as a solution the workflow would hand to the caller.
func TestParseErrorCallbackIsNeverASolution(t *testing.T) {
	for _, code := range []string{"Captcha could not be solved", "SOLVED", "03AGdBq2", ""} {
		for _, f := range []Flavor{AntiCaptcha, CapMonster, CapSolver} {
			got, err := Parse(post("application/json", `{"errorId":1,"errorCode":"`+code+`","status":"ready","solution":{"text":"x"}}`), f)
			assert.Error(t, err, "%s %q became %+v", f, code, got)
		}
	}
}

func TestParseWrapsTheBodyLimit(t *testing.T) {
	for _, f := range []Flavor{"", CapSolver} {
		r := post("application/json", `{"errorId":0,"status":"ready","solution":{"text":"`+strings.Repeat("x", 100)+`"}}`)
		if f == "" {
			r = post("application/x-www-form-urlencoded", "id=1&code="+strings.Repeat("x", 100))
		}
		r.Body = http.MaxBytesReader(httptest.NewRecorder(), r.Body, 10)
		_, err := Parse(r, f)
		var tooLarge *http.MaxBytesError
		assert.True(t, errors.As(err, &tooLarge), "%s: %v", f, err)
	}
}

// FuzzParse: a callback is refused with an *Error or yields a bounded code; a failed envelope yields a status word.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"errorId":0,"status":"ready","solution":{"gRecaptchaResponse":"03A"}}`, `{"errorId":1,"errorCode":"not a code"}`,
		`{"errorId":1,"errorCode":"ERROR_TASK_TIMEOUT","taskId":5}`, `{"errorId":0,"taskId":"x","status":"failed"}`,
		`{"errorId":"1","errorCode":"ABC"}`, "id=1&code=ANSWER", "id=1&code=ERROR_CAPTCHA_UNSOLVABLE", ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, flavor := range append([]Flavor{""}, Flavors...) {
			ct := "application/json"
			if flavor == "" || FormBody(flavor) {
				ct = "application/x-www-form-urlencoded"
			}
			got, err := Parse(post(ct, string(body)), flavor)
			var e *Error
			switch {
			case err != nil && !errors.As(err, &e):
				t.Fatalf("error %v is not an *Error", err)
			case err != nil:
			case got.Code == "" || len(got.Code) > 16<<10:
				t.Fatalf("%s: accepted %q with code %q", flavor, body, got.Code)
			}
			if env, perr := ParseEnvelope(body); err == nil && perr == nil && env.Failed() && !IsStatusWord(got.Code) {
				t.Fatalf("%s: the error callback %q became the solution %q", flavor, body, got.Code)
			}
		}
	})
}
