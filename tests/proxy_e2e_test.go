package tests

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/tests/devstack"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

// TestE2E_ProxiedTasks (issue 38): a proxied reCAPTCHA v2 task is solved through an in.php provider and through an
// Anti-Captcha-style createTask one, each receiving the proxy (its proxied task type, its fields); a proxy the
// provider cannot connect through ends the task ProxyRejected after the one task it created, naming the proxy's
// host and never its password, with nothing sent to the other provider.
func TestE2E_ProxiedTasks(t *testing.T) {
	s := requireStack(t)
	const password, good, bad = "s3cret-e2e-proxy", "203.0.113.7", "198.51.100.9"
	for _, c := range []struct {
		name, taskType, proxyType string // Anti-Captcha's proxyType is lower case
		envA                      map[string]string
	}{
		{"inphp", "", "HTTP", map[string]string{"SIM_BAD_PROXIES": bad}},
		{"anticaptcha", "RecaptchaV2Task", "http", map[string]string{"SIM_PROTOCOL": "createtask", "SIM_FLAVOR": "anticaptcha", "SIM_BAD_PROXIES": bad}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			sc := newScenario(t, s, "proxy-"+c.name)
			r := startRoutedFile(t, s, sc, c.envA, "", "")
			trs := sc.add(2, taskSpec{Kind: "proxied"})
			hosts := map[*taskRun]string{trs[0]: good, trs[1]: bad}
			for _, tr := range trs {
				in := s.input(tr.taskSpec)
				in.Params["proxy"], in.Params["proxytype"], in.Providers = "user:"+password+"@"+hosts[tr]+":3128", "HTTP", []string{providerA}
				_, err := captchaflow.Start(ctx, s.c, tr.ID, in, captchaflow.StartOptions{TaskQueue: r.queue})
				require.NoError(t, err)
			}
			sc.awaitOutcomes(ctx, 2*time.Minute)
			atA, atB := r.tasks(t, ctx, r.urlA, sc), r.tasks(t, ctx, r.urlB, sc)

			require.NoError(t, trs[0].Err, "the proxied task")
			require.Len(t, atA[trs[0].ID], 1, "one task at a")
			got := atA[trs[0].ID][0]
			assert.Equal(t, c.taskType, got.TaskType, "the provider's proxied type")
			assert.Equal(t, &sim.ProxyGot{Type: c.proxyType, Address: good, Port: 3128, Login: "user", Password: true}, got.Proxy)
			assert.Equal(t, sim.AnswerFor(got.ID, got.Method), trs[0].Result.Code)

			require.Error(t, trs[1].Err, "the bad proxy's task")
			assert.Equal(t, captchaflow.FailureProxyRejected, failureType(trs[1].Err), "%v", trs[1].Err)
			assert.Contains(t, trs[1].Err.Error(), bad, "the failure names the proxy's host")
			assert.NotContains(t, trs[1].Err.Error(), password, "the failure shows the password")
			assert.Len(t, atA[trs[1].ID], 1, "paid once at a: no resubmission with the same proxy")
			assert.Empty(t, atB[trs[1].ID], "no failover with the same proxy")
			sc.note("proxy %s: solved through %q, bad proxy: %v", c.name, got.TaskType, trs[1].Err)
			assertProxyPasswordNowhere(ctx, t, s, r, password, trs)
		})
	}
}

// assertProxyPasswordNowhere: only the provider and the decrypted input hold the proxy's password — not the stored
// histories, the worker's and the ingress's logs, the worker's metrics, or the webhook bodies.
func assertProxyPasswordNowhere(ctx context.Context, t *testing.T, s *stack, r *routed, password string, trs []*taskRun) {
	metrics, err := scrape(ctx, r.metrics)
	require.NoError(t, err)
	texts := map[string]string{"the worker's metrics": metrics}
	for _, p := range []*devstack.Process{r.worker, s.ingress} {
		log, err := os.ReadFile(p.LogPath())
		require.NoError(t, err)
		texts[p.Name()+"'s log"] = string(log)
	}
	for _, tr := range trs {
		texts[tr.ID+"'s stored history"] = storedHistory(ctx, t, s.c, tr.ID)
		if d, ok := s.down.Delivery(tr.ID); ok {
			texts[tr.ID+"'s webhook"] = fmt.Sprintf("%+v", d.Payload)
		}
	}
	for what, text := range texts {
		assert.NotContains(t, text, password, "the proxy's password in %s", what)
	}
	h, err := s.history(ctx, trs[0].ID) // the control: decrypted, the input holds it
	require.NoError(t, err)
	b, err := protojson.Marshal(h)
	require.NoError(t, err)
	assert.Contains(t, historyText(b), password, "the scan would not see the password")
}
