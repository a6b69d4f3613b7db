package sim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/providers"
	"github.com/captchaflow/captchaflow/providers/callback"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

// in.php records the proxy and user agent it got (the password only as present), and a proxy it cannot read is
// ERROR_BAD_PROXY at once.
func TestInPHPRecordsTheProxyAndUserAgent(t *testing.T) {
	h := startSim(t, testConfig())
	id := h.submit("", url.Values{"proxy": {"login:hunter2@203.0.113.7:3128"}, "proxytype": {"HTTP"}, "userAgent": {"UA/1"}})
	task := h.task(id)
	require.NotNil(t, task.Proxy)
	assert.Equal(t, sim.ProxyGot{Type: "HTTP", Address: "203.0.113.7", Port: 3128, Login: "login", Password: true}, *task.Proxy)
	assert.Equal(t, "UA/1", task.UserAgent)
	assert.Contains(t, h.call("/in.php", recaptchaParams("", url.Values{"proxy": {"no-port"}})), sim.ErrorBadProxy)
}

// A task whose proxy SIM_BAD_PROXIES names is created, then answered with in.php's proxy word.
func TestInPHPAnswersABadProxyWithItsWord(t *testing.T) {
	cfg := testConfig()
	cfg.BadProxies = []string{"203.0.113.66"}
	h := startSim(t, cfg)
	id := h.submit("", url.Values{"proxy": {"203.0.113.66:3128"}, "proxytype": {"HTTP"}})
	h.waitResult(id, sim.ErrorProxyConnectionFailed)
	ok := h.submit("", url.Values{"proxy": {"203.0.113.7:3128"}, "proxytype": {"HTTP"}})
	h.waitResult(ok, "OK|"+sim.CodeFor(ok))
}

// Every createTask flavor: the client's proxied task reaches the simulator with its proxy recorded; a proxied type
// without a proxy is ERROR_PROXY_MISSING (a flavor whose one type takes both is not refused); a bad proxy ends the
// task with the flavor's own proxy word, which the client classifies as the user's proxy.
func TestCreateTaskProxiedTasks(t *testing.T) {
	for _, flavor := range providers.Flavors {
		t.Run(string(flavor), func(t *testing.T) {
			cfg := ctConfig(flavor)
			cfg.BadProxies = []string{"203.0.113.66"}
			h := startSim(t, cfg)
			c := ctClient(t, h, flavor)
			params := map[string]string{"googlekey": recaptchaSK, "pageurl": "https://example.com/login",
				"proxy": "login:hunter2@203.0.113.7:3128", "proxytype": "HTTP"}
			id, _, err := c.Submit(context.Background(), "userrecaptcha", params, "")
			require.NoError(t, err)
			got := h.task(id)
			require.NotNil(t, got.Proxy)
			assert.Equal(t, sim.ProxyGot{Type: "http", Address: "203.0.113.7", Port: 3128, Login: "login", Password: true}, *got.Proxy)
			spec, _ := providers.TaskFor(flavor, providers.KindRecaptchaV2)
			assert.Equal(t, spec.Proxied, got.TaskType)

			raw, _ := json.Marshal(map[string]any{"clientKey": testKey, "task": map[string]any{"type": spec.Proxied,
				"websiteURL": "https://example.com/", "websiteKey": recaptchaSK}})
			resp, err := http.Post(h.srv.URL+"/createTask", "application/json", bytes.NewReader(raw))
			require.NoError(t, err)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			rp := string(b)
			if spec.Proxied != spec.Type {
				assert.Contains(t, rp, sim.ErrorProxyMissing)
			} else {
				assert.NotContains(t, rp, sim.ErrorProxyMissing)
			}

			params["proxy"] = "203.0.113.66:3128"
			id, _, err = c.Submit(context.Background(), "userrecaptcha", params, "")
			require.NoError(t, err)
			require.Eventually(t, func() bool {
				_, err = c.Get(context.Background(), id)
				return providers.ClassOf(err) != callback.ClassNotReady
			}, waitFor, pollEvery)
			assert.Equal(t, callback.ClassProxy, providers.ClassOf(err), "%v", err)
		})
	}
}
