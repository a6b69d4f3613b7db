package captchaflow

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseProxyReadsBothInPHPForms(t *testing.T) {
	p, err := ParseProxy("user:p@ss:w0rd@203.0.113.7:3128")
	require.NoError(t, err)
	assert.Equal(t, Proxy{Login: "user", Password: "p@ss:w0rd", Host: "203.0.113.7", Port: 3128}, p)
	p, err = ParseProxy("proxy.example.com:1080")
	require.NoError(t, err)
	assert.Equal(t, Proxy{Host: "proxy.example.com", Port: 1080}, p)
	p, err = ParseProxy("[2001:db8::1]:8080")
	require.NoError(t, err)
	assert.Equal(t, "2001:db8::1", p.Host)
}

// A malformed proxy, or one at an address no provider can reach, is InvalidInput naming params.proxy; no message
// echoes the password (nor the login).
func TestProxyValidationNamesTheFieldNeverThePassword(t *testing.T) {
	for proxy, want := range map[string]string{
		"secretuser:hunter2@127.0.0.1:3128":       "loopback",
		"secretuser:hunter2@10.1.2.3:3128":        "private",
		"secretuser:hunter2@192.168.0.9:80":       "private",
		"secretuser:hunter2@169.254.169.254:80":   "link-local",
		"secretuser:hunter2@[::1]:80":             "loopback",
		"secretuser:hunter2@[::ffff:10.0.0.1]:80": "private",
		"secretuser:hunter2@0.0.0.0:80":           "unspecified",
		"secretuser:hunter2@localhost:80":         "public host name",
		"secretuser:hunter2@203.0.113.7":          "login:password@host:port",
		"secretuser:hunter2@203.0.113.7:0":        "port 1-65535",
		"secretuser:hunter2@203.0.113.7:70000":    "port 1-65535",
		"secretuser@203.0.113.7:80":               "login:password@host:port",
		":hunter2@203.0.113.7:80":                 "login:password@host:port",
		"secretuser:hunter2@bad_host!:80":         "public host name",
	} {
		in := Input{Method: "userrecaptcha", Params: Params{"googlekey": "k", "pageurl": "https://e.com",
			"proxy": proxy, "proxytype": "HTTP"}}.WithDefaults()
		err := in.Validate()
		require.Error(t, err, proxy)
		assert.Contains(t, err.Error(), "params.proxy:", proxy)
		assert.Contains(t, err.Error(), want, proxy)
		assert.NotContains(t, err.Error(), "hunter2", proxy)
		assert.NotContains(t, err.Error(), "secretuser", proxy)
	}
}

func TestProxyTypeGoesWithAProxy(t *testing.T) {
	base := func(p Params) error {
		params := Params{"googlekey": "k", "pageurl": "https://e.com"}
		for k, v := range p {
			params[k] = v
		}
		return Input{Method: "userrecaptcha", Params: params}.WithDefaults().Validate()
	}
	for _, typ := range append(ProxyTypes, "socks5", " http ") {
		assert.NoError(t, base(Params{"proxy": "u:p@203.0.113.7:3128", "proxytype": typ}), typ)
	}
	assert.ErrorContains(t, base(Params{"proxy": "203.0.113.7:3128"}), "params.proxytype:")
	assert.ErrorContains(t, base(Params{"proxy": "203.0.113.7:3128", "proxytype": "FTP"}), "params.proxytype:")
	assert.ErrorContains(t, base(Params{"proxytype": "HTTP"}), "params.proxytype: only with params.proxy")
}

// DataDome and a challenge page's cf_clearance are solved through the user's proxy only: without one the task is
// InvalidInput naming params.proxy, never submitted.
func TestProxiedMethodsNeedAProxy(t *testing.T) {
	datadome := Params{"captcha_url": "https://geo.captcha-delivery.com/captcha/?t=fe", "pageurl": "https://e.com", "userAgent": "Mozilla/5.0"}
	for method, params := range map[string]Params{"datadome": datadome, "cf_clearance": {"pageurl": "https://e.com"}} {
		err := Input{Method: method, Params: params}.WithDefaults().Validate()
		assert.ErrorContains(t, err, "params.proxy: required for method "+method, method)
		params["proxy"], params["proxytype"] = "u:p@203.0.113.7:3128", "HTTP"
		assert.NoError(t, Input{Method: method, Params: params}.WithDefaults().Validate(), method)
	}
}
