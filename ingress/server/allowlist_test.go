package server

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/internal/config"
)

// #15 §3d: with UNTOKENED_ALLOW_CIDRS set, only the provider's callback sources are served on the untokened route;
// others get 403 naming the setting, cost no lookup and take no share of the rate. The tokened route is not
// affected (its token is the proof).
func TestUntokenedAllowCIDRs(t *testing.T) {
	e := newTestEnv(t, func(c *config.Ingress) {
		c.UntokenedAllowCIDRs = []string{"198.51.100.0/24", " 2001:db8::/32", ""}
	})
	findsWaitingTask(e)
	target := "/callback?id=" + waitingProviderID + "&code=c"
	for remote, want := range map[string]int{
		"198.51.100.7:443":   http.StatusOK,
		"[2001:db8::5]:443":  http.StatusOK,
		"203.0.113.9:4000":   http.StatusForbidden,
		"[2001:db9::5]:4000": http.StatusForbidden,
	} {
		rec := e.getFrom(t, target+remote, remote, nil)
		if want == http.StatusForbidden {
			requireError(t, rec, http.StatusForbidden, "UNTOKENED_ALLOW_CIDRS")
			continue
		}
		require.Equal(t, want, rec.Code, remote)
	}
	// A spoofed X-Forwarded-For does not get a source in: no proxy is trusted.
	requireError(t, e.getFrom(t, target+"xff", "203.0.113.9:4000", http.Header{"X-Forwarded-For": {"198.51.100.7"}}),
		http.StatusForbidden, "UNTOKENED_ALLOW_CIDRS")
	assert.Equal(t, http.StatusOK, e.getFrom(t, tokenedURL(waitingWorkflowID, testSecret,
		url.Values{"id": {waitingProviderID}, "code": {"c"}}), "203.0.113.9:4000", nil).Code, "tokened: any source")
	e.drainQueue(t)
	assert.Equal(t, 3.0, e.callbacks(routeUntokened, outcomeSourceRefused))
	assert.Len(t, e.fake.listQueries(), 2, "refused sources cost no lookup")
	assert.Equal(t, 2, e.srv.clientLimit.activeSources(e.srv.now()), "nor a share of the rate")
}

// Behind a trusted proxy, the client it names is checked.
func TestUntokenedAllowCIDRsBehindATrustedProxy(t *testing.T) {
	e := newTestEnv(t, func(c *config.Ingress) {
		c.TrustedProxies = []string{"10.0.0.0/8"}
		c.UntokenedAllowCIDRs = []string{"198.51.100.0/24"}
	})
	from := func(client string) int {
		return e.getFrom(t, "/callback?id=1&code="+client, "10.1.2.3:5555", http.Header{"X-Forwarded-For": {client}}).Code
	}
	assert.Equal(t, http.StatusOK, from("198.51.100.9"))
	assert.Equal(t, http.StatusForbidden, from("203.0.113.9"))
}

func TestNewRejectsBadUntokenedAllowCIDRs(t *testing.T) {
	cfg := testConfig()
	cfg.UntokenedAllowCIDRs = []string{"198.51.100.0/24", "198.51.100.7", "not-a-cidr"}
	_, err := New(cfg, &fakeTemporal{}, nil, nil)
	require.ErrorContains(t, err, `UNTOKENED_ALLOW_CIDRS: "198.51.100.7" is not a CIDR like 10.0.0.0/8 (a single address is 192.0.2.1/32)`)
	require.ErrorContains(t, err, `UNTOKENED_ALLOW_CIDRS: "not-a-cidr"`)
}
