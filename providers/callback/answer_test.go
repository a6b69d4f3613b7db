package callback

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Each provider's shape of an answer that holds more than a token: the code, the user agent and the cookies.
func TestAnswerReadsUserAgentAndCookies(t *testing.T) {
	for _, c := range []struct {
		name     string
		sol      Solution
		raw      string
		code, ua string
		cookies  map[string]string
	}{
		{"challenge token (2captcha, Anti-Captcha)", TokenAndAgent, `{"token":"0.zrSnRHO7h0","userAgent":"Mozilla/5.0 X"}`,
			"0.zrSnRHO7h0", "Mozilla/5.0 X", nil},
		{"DataDome Set-Cookie line (2captcha, CapSolver)", DataDome, `{"cookie":"datadome=4ZXwCBly~_v; Max-Age=31536000; Domain=.site.example; Path=/; Secure; SameSite=Lax"}`,
			"4ZXwCBly~_v", "", map[string]string{"datadome": "4ZXwCBly~_v"}},
		{"DataDome per domain (CapMonster)", DataDome, `{"domains":{"www.site.example":{"cookies":{"datadome":"P1w0VnjF"}}}}`,
			"P1w0VnjF", "", map[string]string{"datadome": "P1w0VnjF"}},
		{"cf_clearance field (CapMonster)", CFClearance, `{"cf_clearance":"Bcg6jNLz-1714000000"}`,
			"Bcg6jNLz-1714000000", "", map[string]string{"cf_clearance": "Bcg6jNLz-1714000000"}},
		{"cf_clearance in cookies (CapSolver)", CFClearance, `{"cookies":{"cf_clearance":"Bcg6","__cf_bm":"x1"},"token":"t","userAgent":"Mozilla/5.0 Y"}`,
			"Bcg6", "Mozilla/5.0 Y", map[string]string{"cf_clearance": "Bcg6", "__cf_bm": "x1"}},
		{"aws-waf-token in cookies (CapMonster)", AWSWAF, `{"cookies":{"aws-waf-token":"9ee1:EQoA"},"userAgent":"Mozilla/5.0 Z"}`,
			"9ee1:EQoA", "Mozilla/5.0 Z", map[string]string{"aws-waf-token": "9ee1:EQoA"}},
		{"aws-waf-token's value alone (CapSolver)", AWSWAF, `{"cookie":"223d1f60-0e9f:EQoAf0APpGIK=="}`,
			"223d1f60-0e9f:EQoAf0APpGIK==", "", map[string]string{"aws-waf-token": "223d1f60-0e9f:EQoAf0APpGIK=="}},
		{"a Cookie header", Solution{}, `{"gRecaptchaResponse":"03AG","cookies":"a=1; b=2"}`,
			"03AG", "", map[string]string{"a": "1", "b": "2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, err := c.sol.Answer(json.RawMessage(c.raw))
			require.NoError(t, err)
			assert.Equal(t, c.code, a.Code)
			assert.Equal(t, c.ua, a.UserAgent)
			assert.Equal(t, JoinCookies(c.cookies), JoinCookies(a.Cookies))
		})
	}
	a, err := DataDome.Answer(json.RawMessage(`{"cookies":null,"domains":{"a.example":{"cookies":{"datadome":"v"}}},"cookie":null}`))
	require.NoError(t, err, "a null field is none")
	assert.Equal(t, "v", a.Code)
	_, err = DataDome.Answer(json.RawMessage(`{"cookie":"other=1"}`))
	assert.ErrorIs(t, err, errNoCode, "a cookie kind's answer without its cookie has no code")
}
