package tests

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

// TestE2E_KindsThatAnswerMore (issue 38 item 2): a Cloudflare challenge page's token and a DataDome cookie, solved
// through an in.php provider and through a createTask one (2captcha's API v2), reach the Result and the webhook with
// the user agent they were solved with and, for DataDome, the cookie (the code is its value). The pingback carries
// the code alone and an ids= batch drops the user agent: the user agent in the Result shows the code came from a
// result request of the task's own.
func TestE2E_KindsThatAnswerMore(t *testing.T) {
	s := requireStack(t)
	const ua = "Mozilla/5.0 (e2e) Chrome/131.0.0.0"
	for _, c := range []struct {
		name string
		envA map[string]string
		// sessionCookie: the createTask simulator answers a second cookie with DataDome's.
		sessionCookie string
	}{
		{"inphp", map[string]string{}, ""},
		{"2captcha", map[string]string{"SIM_PROTOCOL": "createtask", "SIM_FLAVOR": "2captcha"}, "; sim_session=1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			sc := newScenario(t, s, "kinds-"+c.name)
			r := startRoutedFile(t, s, sc, c.envA, "", "")
			trs := sc.add(2, taskSpec{Kind: "answers-more"})
			challenge, datadome := trs[0], trs[1]
			for tr, in := range map[*taskRun]captchaflow.Input{
				challenge: {Method: "turnstile", Params: captchaflow.Params{"sitekey": "0x4AAAAAAAe2e", "pageurl": "https://shop.example.test/",
					"action": "managed", "data": "80001aa1", "pagedata": "3gAFo2l", "userAgent": ua}},
				datadome: {Method: "datadome", Params: captchaflow.Params{"pageurl": "https://shop.example.test/", "userAgent": ua,
					"captcha_url": "https://geo.captcha-delivery.com/captcha/?initialCid=AHrl&t=fe", "proxy": "u:p@203.0.113.7:3128", "proxytype": "HTTP"}},
			} {
				base := s.input(tr.taskSpec)
				base.Method, base.Params, base.Providers = in.Method, in.Params, []string{providerA}
				_, err := captchaflow.Start(ctx, s.c, tr.ID, base, captchaflow.StartOptions{TaskQueue: r.queue})
				require.NoError(t, err)
			}
			sc.awaitOutcomes(ctx, 2*time.Minute)
			atA := r.tasks(t, ctx, r.urlA, sc)
			for _, tr := range trs {
				require.NoError(t, tr.Err, "%s", tr.ID)
				require.Len(t, atA[tr.ID], 1, "one task at a")
				got := atA[tr.ID][0]
				assert.Equal(t, sim.CodeFor(got.ID), tr.Result.Code, "%s: the token, or the cookie's value", tr.ID)
				assert.Equal(t, ua, tr.Result.UserAgent, "%s: the user agent it was solved with", tr.ID)
				d, ok := s.down.Delivery(tr.ID)
				require.True(t, ok, "%s delivered", tr.ID)
				assert.Equal(t, tr.Result.UserAgent, d.Payload.UserAgent, "the webhook's user_agent")
				assert.Equal(t, tr.Result.Cookies, d.Payload.Cookies, "the webhook's cookies")
			}
			assert.Empty(t, challenge.Result.Cookies)
			assert.Equal(t, "datadome="+sim.CodeFor(atA[datadome.ID][0].ID)+c.sessionCookie, datadome.Result.Cookies)
			sc.note("kinds %s: challenge via %s, datadome via %s", c.name, challenge.Result.Via, datadome.Result.Via)
			replayLive(t, s, challenge.ID, datadome.ID)
			recordNew(t, s, map[string]string{"answers-more-challenge-" + c.name: challenge.ID, "answers-more-datadome-" + c.name: datadome.ID,
				"answers-whole-challenge-" + c.name: challenge.ID})
		})
	}
}
