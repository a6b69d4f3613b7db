package providers

import (
	"github.com/captchaflow/captchaflow/providers/callback"

	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseAnswer(t *testing.T) {
	tests := []struct {
		name string
		body string
		want answer
	}{
		{"json success string", `{"status":1,"request":"2122988149"}`, answer{OK: true, Value: "2122988149"}},
		{"json success numeric id", `{"status":1,"request":2122988149}`, answer{OK: true, Value: "2122988149"}},
		{"json numeric balance", `{"status":1,"request":12.5}`, answer{OK: true, Value: "12.5"}},
		{"json status as string", `{"status":"1","request":"abc"}`, answer{OK: true, Value: "abc"}},
		{"json structured token", `{"status":1,"request":{"challenge":"c","validate":"v"}}`, answer{OK: true, Value: `{"challenge":"c","validate":"v"}`}},
		{"json escaped string", `{"status":1,"request":"a\/b\u00e9\"q"}`, answer{OK: true, Value: "a/b\u00e9\"q"}},
		{"json null request", `{"status":1,"request":null}`, answer{OK: true}},
		{"json surrounding whitespace", " \n{\"status\":1,\"request\":\"x\"}\r\n", answer{OK: true, Value: "x"}},
		{"json error with text", `{"status":0,"request":"ERROR_PAGEURL","error_text":"pageurl missing"}`, answer{Code: "ERROR_PAGEURL", ErrorText: "pageurl missing"}},
		{"json not ready", `{"status":0,"request":"CAPCHA_NOT_READY"}`, answer{Code: "CAPCHA_NOT_READY"}},
		{"json report recorded", `{"status":1,"request":"OK_REPORT_RECORDED"}`, answer{OK: true, Value: "OK_REPORT_RECORDED"}},
		{"plain success", "OK|2122988149", answer{OK: true, Value: "2122988149"}},
		{"plain success keeps later pipes", "OK|coordinates:x=1,y=2|x=3,y=4", answer{OK: true, Value: "coordinates:x=1,y=2|x=3,y=4"}},
		{"plain success trailing newline", "OK|token\n", answer{OK: true, Value: "token"}},
		{"plain bare OK", "OK", answer{OK: true}},
		{"plain report recorded", "OK_REPORT_RECORDED", answer{OK: true, Value: "OK_REPORT_RECORDED"}},
		{"plain balance", "3.141", answer{OK: true, Value: "3.141"}},
		{"plain error", "ERROR_NO_SLOT_AVAILABLE", answer{Code: "ERROR_NO_SLOT_AVAILABLE"}},
		{"plain not ready", "CAPCHA_NOT_READY", answer{Code: "CAPCHA_NOT_READY"}},
		{"plain numbered error", "ERROR: 1001", answer{Code: "ERROR: 1001"}},
		{"plain ip banned", "IP_BANNED", answer{Code: "IP_BANNED"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseAnswer([]byte(tt.body))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseAnswerMalformed(t *testing.T) {
	tests := []struct{ name, body string }{
		{"empty", ""},
		{"whitespace", " \r\n\t"},
		{"truncated json", `{"status":1,`},
		{"json missing status", `{"request":"x"}`},
		{"json odd status", `{"status":2,"request":"x"}`},
		{"json error without code", `{"status":0,"request":"","error_text":"?"}`},
		{"html error page", "<html><body>502 Bad Gateway</body></html>"},
		{"lowercase garbage", "something went wrong"},
		{"ERROR colon without number", "ERROR: oops"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseAnswer([]byte(tt.body))
			require.ErrorIs(t, err, callback.ErrMalformed)
		})
	}
}

func TestParseAnswerMalformedSnippetIsBounded(t *testing.T) {
	_, err := parseAnswer([]byte("<html>" + strings.Repeat("x", 10_000)))
	require.ErrorIs(t, err, callback.ErrMalformed)
	assert.Less(t, len(err.Error()), 200)
}

// A realistic reCAPTCHA token is several hundred characters long.
var benchToken = strings.Repeat("03AGdBq24PBCbwiDRaS_MJ7Z", 20)

func benchmarkParse(b *testing.B, body []byte) {
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := parseAnswer(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseAnswerJSONToken(b *testing.B) {
	benchmarkParse(b, []byte(`{"status":1,"request":"`+benchToken+`"}`))
}

func BenchmarkParseAnswerJSONNotReady(b *testing.B) {
	benchmarkParse(b, []byte(`{"status":0,"request":"CAPCHA_NOT_READY"}`))
}

func BenchmarkParseAnswerJSONErrorText(b *testing.B) {
	benchmarkParse(b, []byte(`{"status":0,"request":"ERROR_WRONG_USER_KEY","error_text":"You've provided key parameter value in incorrect format"}`))
}

func BenchmarkParseAnswerPlainToken(b *testing.B) {
	benchmarkParse(b, []byte("OK|"+benchToken))
}

func BenchmarkParseAnswerPlainNotReady(b *testing.B) {
	benchmarkParse(b, []byte("CAPCHA_NOT_READY"))
}

// res.php's JSON carries a challenge page's useragent, and 2captcha's DataDome answer is a Set-Cookie line whose
// cookie's value is the code; such a kind is asked with id=, never in an ids= batch.
func TestInPHPAnswerCarriesUserAgentAndCookie(t *testing.T) {
	p := newFakeProvider(t, func(r *http.Request) reply {
		if r.FormValue("id") == "1" {
			return reply{body: `{"status":1,"request":"0.zrSnRHO7","useragent":"Mozilla/5.0 T"}`}
		}
		return reply{body: `{"status":1,"request":"datadome=4ZXwCBly; Max-Age=31536000; Domain=.site.example; Path=/; Secure","useragent":"Mozilla/5.0 D"}`}
	})
	c := p.client(t)
	a, err := c.Answer(ForMethod(context.Background(), "turnstile"), "1", KindTurnstileChallenge)
	require.NoError(t, err)
	assert.Equal(t, Answer{Code: "0.zrSnRHO7", UserAgent: "Mozilla/5.0 T"}, a)
	a, err = c.Answer(context.Background(), "2", KindDataDome)
	require.NoError(t, err)
	assert.Equal(t, Answer{Code: "4ZXwCBly", UserAgent: "Mozilla/5.0 D", Cookies: map[string]string{"datadome": "4ZXwCBly"}}, a)
	for _, r := range p.requests {
		assert.Empty(t, r.FormValue("ids"), "never batched")
	}
}
