package providers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/providers/callback"
)

// #29 §7: under routing: scored every method a provider serves has a price (its own, or default), else the worker
// refuses to start naming the field; an in.php provider serves any method, so only default prices it all. Files
// routed in order need no prices.
func TestScoredFilePricesEveryServedMethod(t *testing.T) {
	getenv := func(string) string { return "key" }
	parse := func(routing, providers string) error {
		_, err := ParseFile([]byte("routing: "+routing+"\nproviders:\n"+providers), getenv)
		return err
	}
	inphp := "  - {name: a, protocol: inphp, base_url: https://a.example, api_key_env: A, price_per_1000: %s}\n"
	anti := "  - {name: b, protocol: createtask, flavor: anticaptcha, api_key_env: B, price_per_1000: %s}\n"
	bare := "  - {name: c, protocol: createtask, flavor: 2captcha, api_key_env: C}\n"
	require.NoError(t, parse("order", fmt.Sprintf(inphp, "{userrecaptcha: 1}")+bare), "routing: order needs no price")
	require.NoError(t, parse("scored", fmt.Sprintf(inphp, "2.99")+fmt.Sprintf(anti, "{default: 1, userrecaptcha: 2}")))
	every := "{userrecaptcha: 1, base64: 1, post: 1, turnstile: 1, funcaptcha: 1, geetest: 1, geetest_v4: 1, friendly_captcha: 1}"
	require.NoError(t, parse("scored", fmt.Sprintf(anti, every)), "every method Anti-Captcha serves is priced")

	err := parse("scored", fmt.Sprintf(inphp, "{userrecaptcha: 1}")+fmt.Sprintf(anti, "{userrecaptcha: 1, base64: 1}")+bare)
	require.Error(t, err, "unpriced methods are free under routing: scored")
	assert.Contains(t, err.Error(), "providers[0].price_per_1000.default: required under routing: scored")
	assert.Contains(t, err.Error(), "providers[1].price_per_1000: no price for friendly_captcha, funcaptcha, geetest, geetest_v4, post, turnstile")
	assert.Contains(t, err.Error(), "providers[2].price_per_1000: no price for datadome, hcaptcha, turnstile, userrecaptcha")
}

// #29 suspicion: getTaskResult's cost is one task's, in USD (Anti-Captcha: "Cost of the task in USD", 0.000700;
// 2captcha: "The task price charged from your balance", 0.00299). A figure no CAPTCHA task costs (a per-1 000
// price, or garbage up to $1e6) is not taken over the file's price.
func TestResultCostIsOneTasks(t *testing.T) {
	for cost, want := range map[string]float64{`"0.000700"`: 0.0007, `"0.00299"`: 0.00299, `"2.99"`: 0, `999999`: 0} {
		p := newFake(t, ctAlways(200, `{"errorId":0,"status":"ready","solution":{"gRecaptchaResponse":"03AG"},"cost":`+cost+`}`))
		a, err := p.client(t, callback.AntiCaptcha).Answer(context.Background(), "7654321", "")
		require.NoError(t, err)
		assert.InDelta(t, want, a.CostUSD, 1e-12, cost)
	}
}

// #29 §9: exploring asks a circuit without taking its half-open probe: Allows says what Allow would, changing nothing.
func TestAllowsTakesNoProbe(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	b := NewBreaker(DefaultCircuitSettings, c.now)
	b.Record("a", OutcomeZeroBalance)
	assert.False(t, b.Allows("a"), "open")
	c.advance(time.Minute)
	assert.True(t, b.Allows("a"), "half-open, no probe out")
	assert.True(t, b.Allows("a"), "asking took no probe")
	ok, _, _ := b.Allow("a")
	assert.True(t, ok, "the probe is still there for Submit")
	assert.False(t, b.Allows("a"), "its probe is out: Submit would skip it")
	assert.True(t, (*Breaker)(nil).Allows("a"), "no breaker: always closed")
}

// Methods is what the tables serve: each method it names reaches one of the flavor's tasks, and every task is reached.
func TestMethodsAreTheTables(t *testing.T) {
	for _, f := range Flavors {
		reached := map[Kind]bool{}
		for _, m := range Methods(f) {
			for _, params := range []map[string]string{{}, {"version": "v3"}, {"enterprise": "1"}, {"version": "v3", "enterprise": "1"}, {"pagedata": "P"}} {
				if kind, err := KindOf(m, params); err == nil {
					_, ok := TaskFor(f, kind)
					reached[kind] = reached[kind] || ok
				}
			}
		}
		for _, kind := range Kinds {
			_, ok := TaskFor(f, kind)
			assert.Equal(t, ok, reached[kind], "%s %s", f, kind)
		}
	}
}

// The task types a provider refused are forgotten once they expire: callers naming a new in.php method each time
// (ERROR_NO_SUCH_METHOD) cannot grow the worker's memory beyond the last UnsupportedFor's refusals.
func TestRefusedTypesAreForgotten(t *testing.T) {
	now := time.Unix(0, 0)
	b := NewBreaker(DefaultCircuitSettings, func() time.Time { return now })
	for i := range 1000 {
		b.Refused("a", fmt.Sprintf("method_%d", i), nil)
	}
	now = now.Add(UnsupportedFor)
	b.Refused("a", "one_more", nil)
	assert.Equal(t, 1, len(b.lacks), "the expired refusals are forgotten")
	assert.True(t, b.Lacks("a", "one_more", nil))
	assert.False(t, b.Lacks("a", "method_1", nil))
}
