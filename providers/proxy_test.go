package providers

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/providers/callback"
)

// proxiedParams are a valid task of kind with a proxy; the password is "hunter2".
func proxiedParams(kind Kind, proxy, typ string) (string, map[string]string) {
	method, params := methodRecaptcha, map[string]string{"googlekey": "K", "sitekey": "K", "pageurl": "https://site.example/",
		"publickey": "P", "gt": "G", "challenge": "C", "captcha_id": "I", "body": pngB64, "proxy": proxy, "proxytype": typ,
		"iv": "IV", "context": "CTX", "captcha_url": "https://geo.captcha-delivery.com/captcha/?t=fe", "userAgent": "Mozilla/5.0",
		"pagedata": "PD"}
	switch kind {
	case KindRecaptchaV2:
	case KindRecaptchaV2Enterprise:
		params["enterprise"] = "1"
	case KindRecaptchaV3, KindRecaptchaV3Enterprise:
		params["version"], params["enterprise"] = "v3", map[Kind]string{KindRecaptchaV3Enterprise: "1"}[kind]
	case KindImage:
		method = "base64"
	default:
		method = string(kind)
	}
	if kind == KindTurnstileChallenge {
		method = string(KindTurnstile)
	}
	for _, k := range []string{"googlekey", "sitekey", "publickey", "gt", "challenge", "captcha_id", "body", "iv", "context", "captcha_url",
		"userAgent", "pagedata"} {
		if !slices.Contains(kindParams[kind], k) {
			delete(params, k)
		}
	}
	return method, params
}

var kindParams = map[Kind][]string{KindRecaptchaV2: {"googlekey"}, KindRecaptchaV2Enterprise: {"googlekey"}, KindRecaptchaV3: {"googlekey"},
	KindRecaptchaV3Enterprise: {"googlekey"}, KindHCaptcha: {"sitekey"}, KindTurnstile: {"sitekey"}, KindFunCaptcha: {"publickey"},
	KindGeeTest3: {"gt", "challenge"}, KindGeeTest4: {"captcha_id"}, KindImage: {"body"},
	KindTurnstileChallenge: {"sitekey", "pagedata"}, KindCFClearance: {"userAgent"},
	KindDataDome: {"captcha_url", "userAgent"}, KindAmazonWAF: {"sitekey", "iv", "context"}, KindMTCaptcha: {"sitekey"}, KindFriendlyCaptcha: {"sitekey"}}

// A task with a proxy is never sent proxyless: a flavor without a proxied variant of the kind does not take it, and
// one with a variant sends that type with the documented proxy fields.
func TestAProxiedTaskIsNeverSentProxyless(t *testing.T) {
	for _, kind := range Kinds {
		for _, f := range Flavors {
			spec, ok := TaskFor(f, kind)
			if !ok {
				continue
			}
			method, params := proxiedParams(kind, "user:hunter2@203.0.113.7:3128", "SOCKS5")
			task, _, err := buildTask(f, method, params)
			if spec.Proxied == "" {
				assert.ErrorIs(t, err, ErrUnsupported, "%s/%s", f, kind)
				continue
			}
			require.NoError(t, err, "%s/%s", f, kind)
			assert.Equal(t, spec.Proxied, task["type"], "%s/%s", f, kind)
			assert.Equal(t, "203.0.113.7", task["proxyAddress"], "%s/%s", f, kind)
			assert.Equal(t, 3128, task["proxyPort"], "%s/%s", f, kind)
			assert.Equal(t, "hunter2", task["proxyPassword"], "%s/%s", f, kind)
			assert.NotContains(t, task, "proxy", "%s/%s: the in.php param is not sent as is", f, kind)
			delete(params, "proxy")
			delete(params, "proxytype")
			plain, _, err := buildTask(f, method, params)
			if spec.Type == "" { // a proxied type without a proxy is refused, as the provider would (ERROR_PROXY_MISSING)
				assert.ErrorContains(t, err, "params.proxy: required", "%s/%s", f, kind)
				continue
			}
			require.NoError(t, err, "%s/%s", f, kind)
			assert.Equal(t, spec.Type, plain["type"], "%s/%s", f, kind)
			assert.NotContains(t, plain, "proxyAddress")
		}
	}
}

// What a flavor cannot express is not sent to it: a proxy type it lacks, a host name where it takes IPs only
// (Anti-Captcha), a field only its proxied type has. No error holds the password.
func TestProxiesAFlavorCannotTakeAreUnsupported(t *testing.T) {
	for _, c := range []struct {
		flavor Flavor
		params map[string]string
		ok     bool
	}{
		{callback.CapSolver, map[string]string{"proxy": "u:hunter2@203.0.113.7:80", "proxytype": "SOCKS4"}, false},
		{callback.TwoCaptcha, map[string]string{"proxy": "u:hunter2@203.0.113.7:80", "proxytype": "HTTPS"}, false},
		{callback.AntiCaptcha, map[string]string{"proxy": "u:hunter2@proxy.example.com:80", "proxytype": "HTTP"}, false},
		{callback.TwoCaptcha, map[string]string{"proxy": "u:hunter2@proxy.example.com:80", "proxytype": "HTTP"}, true},
		{callback.AntiCaptcha, map[string]string{"userAgent": "Mozilla/5.0"}, false}, // RecaptchaV2TaskProxyless has no userAgent
		{callback.AntiCaptcha, map[string]string{"userAgent": "Mozilla/5.0", "proxy": "203.0.113.7:80", "proxytype": "HTTP"}, true},
		{callback.TwoCaptcha, map[string]string{"userAgent": "Mozilla/5.0", "cookies": "a:1"}, true},
	} {
		params := map[string]string{"googlekey": "K", "pageurl": "https://site.example/"}
		for k, v := range c.params {
			params[k] = v
		}
		task, _, err := buildTask(c.flavor, methodRecaptcha, params)
		if c.ok {
			assert.NoError(t, err, "%s %v", c.flavor, c.params)
			if ua := c.params["userAgent"]; ua != "" {
				assert.Equal(t, ua, task["userAgent"], "%s %v", c.flavor, c.params)
			}
			continue
		}
		assert.ErrorIs(t, err, ErrUnsupported, "%s %v", c.flavor, c.params)
		if err != nil {
			assert.NotContains(t, err.Error(), "hunter2")
		}
	}
}

func TestCookiesBecomeACookieHeader(t *testing.T) {
	assert.Equal(t, "a=1; b=x:y; c=3", cookieHeader("a:1;b=x:y; c:3;"))
}

// The type-refusal memory keeps proxied and proxyless apart: one refused proxied task bars no proxyless task.
func TestTypeRefusalMemoryKeepsProxiedApart(t *testing.T) {
	b := NewBreaker(DefaultCircuitSettings, time.Now)
	plain := map[string]string{"googlekey": "K", "pageurl": "https://e.com/"}
	proxied := map[string]string{"googlekey": "K", "pageurl": "https://e.com/", "proxy": "203.0.113.7:80", "proxytype": "HTTP"}
	b.Refused("a", methodRecaptcha, proxied)
	assert.True(t, b.Lacks("a", methodRecaptcha, proxied))
	assert.False(t, b.Lacks("a", methodRecaptcha, plain))
	b.Refused("b", methodRecaptcha, plain)
	assert.False(t, b.Lacks("b", methodRecaptcha, proxied))
}

// in.php takes the proxy params as they are.
func TestInPHPSendsTheProxyAsItIs(t *testing.T) {
	_, body, err := encodeSubmit(testKey, methodRecaptcha, map[string]string{"googlekey": "K", "pageurl": "https://e.com/",
		"proxy": "u:p@203.0.113.7:3128", "proxytype": "HTTP", "userAgent": "UA"}, "")
	require.NoError(t, err)
	form, err := url.ParseQuery(string(body))
	require.NoError(t, err)
	assert.Equal(t, "u:p@203.0.113.7:3128", form.Get("proxy"))
	assert.Equal(t, "HTTP", form.Get("proxytype"))
	assert.Equal(t, "UA", form.Get("userAgent"))
}

// A provider's error text may quote the proxy: neither client's error holds its password.
func TestSubmitErrorsNeverHoldTheProxyPassword(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "createTask") {
			_, _ = w.Write([]byte(`{"errorId":1,"errorCode":"ERROR_PROXY_BANNED","errorDescription":"proxy login:hunter2@203.0.113.7:3128 is banned"}`))
			return
		}
		_, _ = w.Write([]byte(`{"status":0,"request":"ERROR_BAD_PROXY","error_text":"bad proxy login:hunter2@203.0.113.7:3128"}`))
	}))
	defer srv.Close()
	params := map[string]string{"googlekey": "K", "pageurl": "https://e.com/", "proxy": "login:hunter2@203.0.113.7:3128", "proxytype": "HTTP"}
	ct, err := NewCreateTask(callback.TwoCaptcha, srv.URL, testKey)
	require.NoError(t, err)
	_, _, err = ct.Submit(context.Background(), methodRecaptcha, params, "")
	require.Error(t, err)
	assert.Equal(t, callback.ClassProxy, ClassOf(err))
	assert.NotContains(t, fmt.Sprintf("%v %+v", err, err), "hunter2")
	assert.Contains(t, err.Error(), "REDACTED@203.0.113.7")
	in, err := NewInPHP(srv.URL, testKey)
	require.NoError(t, err)
	_, _, err = in.Submit(context.Background(), methodRecaptcha, params, "")
	require.Error(t, err)
	assert.Equal(t, callback.ClassProxy, ClassOf(err))
	assert.NotContains(t, fmt.Sprintf("%v %+v", err, err), "hunter2")
}

// A provider's error text quoting a proxy loses its password even where the params are not known (a poll's).
func TestProviderTextsNeverHoldAProxyPassword(t *testing.T) {
	c := conn{name: "p", apiKey: testKey}
	e := c.codeError("getTaskResult", "ERROR_PROXY_BANNED", `proxy "login:s3cr:et@203.0.113.7:3128" banned`, 200)
	assert.NotContains(t, e.Error(), "s3cr")
	assert.Contains(t, e.Error(), "login:REDACTED@203.0.113.7:3128")
	assert.Contains(t, c.codeError("get", "ERROR_X", "at 12:30 nothing@all", 200).Error(), "12:30 nothing@all")
}
