package providers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/providers/callback"
)

// jsonReply is res.php's json=1 document.
func jsonReply(status int, request string) reply {
	b, _ := json.Marshal(map[string]any{"status": status, "request": request})
	return reply{body: string(b)}
}

// resAnswers answers action=get&id= and action=get&ids= (2captcha: the answers in the IDs' order, joined by "|")
// with word(id); a delay holds each answer back.
func resAnswers(delay time.Duration, word func(id string) string) func(*http.Request) reply {
	return func(r *http.Request) reply {
		time.Sleep(delay)
		if id := r.Form.Get("id"); id != "" {
			if w := word(id); callback.IsStatusWord(w) {
				return jsonReply(0, w)
			}
			return jsonReply(1, word(id))
		}
		var parts []string
		for id := range strings.SplitSeq(r.Form.Get("ids"), ",") {
			parts = append(parts, word(id))
		}
		return jsonReply(1, strings.Join(parts, "|"))
	}
}

func codeOf(id string) string { return "CODE-" + id }

// getAll runs one Get per id at once and returns each one's code and error, in ids' order; a ctx naming no method
// polls reCAPTCHA tokens, which batch.
func getAll(ctx context.Context, c *InPHP, ids []string) ([]string, []error) {
	if ctx.Value(methodKey{}) == nil {
		ctx = ForMethod(ctx, "userrecaptcha")
	}
	codes, errs := make([]string, len(ids)), make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() { codes[i], errs[i] = c.Get(ctx, id) })
	}
	wg.Wait()
	return codes, errs
}

func ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(7000000 + i)
	}
	return out
}

func TestConcurrentGetsShareRequests(t *testing.T) {
	p := newFakeProvider(t, resAnswers(20*time.Millisecond, codeOf))
	codes, errs := getAll(context.Background(), p.client(t), ids(300))
	for i, id := range ids(300) {
		require.NoError(t, errs[i], id)
		assert.Equal(t, codeOf(id), codes[i], "each caller gets its own task's code")
	}
	assert.LessOrEqual(t, p.requestCount(), 6, "300 lookups at once take a handful of requests, not 300")
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.requests {
		assert.Equal(t, "get", r.Form.Get("action"))
		assert.Equal(t, "1", r.Form.Get("json"))
		assert.LessOrEqual(t, len(strings.Split(r.Form.Get("ids"), ",")), maxBatchIDs)
	}
}

func TestBatchingOffMakesOneRequestEach(t *testing.T) {
	p := newFakeProvider(t, resAnswers(0, codeOf))
	_, errs := getAll(context.Background(), p.client(t, WithResultBatching(-1)), ids(20))
	for _, err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, 20, p.requestCount())
	assert.Empty(t, p.lastRequest(t).Form.Get("ids"))
}

// Lookups that come one at a time, as the server dispatches an account's polls evenly, still share requests: one
// client's requests are spaced by the batching window.
func TestEvenlySpreadLookupsShareSpacedRequests(t *testing.T) {
	p := newFakeProvider(t, resAnswers(0, codeOf))
	c := p.client(t, WithResultBatching(500*time.Millisecond))
	var wg sync.WaitGroup
	for i, id := range ids(50) { // one every 30 ms for 1.5 s
		time.Sleep(30 * time.Millisecond)
		wg.Go(func() {
			code, err := c.Get(ForMethod(context.Background(), "userrecaptcha"), id)
			assert.NoError(t, err)
			assert.Equal(t, codeOf(id), code, i)
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, p.requestCount(), 6, "50 lookups over 1.5 s, requests at least 500 ms apart")
}

// An answer that may hold "|" (free text, FunCaptcha's token, GeeTest's object, an unlisted or unnamed method's) is
// never batched; a reCAPTCHA token is.
func TestFreeTextLookupsAreAskedAlone(t *testing.T) {
	p := newFakeProvider(t, resAnswers(20*time.Millisecond, codeOf))
	for i, method := range []string{"post", "textcaptcha", "funcaptcha", "geetest", "coordinates", ""} {
		_, errs := getAll(ForMethod(context.Background(), method), p.client(t), ids(20))
		require.NoError(t, errors.Join(errs...))
		assert.Equal(t, 20*(i+1), p.requestCount(), method)
	}
	p = newFakeProvider(t, resAnswers(20*time.Millisecond, codeOf))
	_, _ = getAll(ForMethod(context.Background(), "userrecaptcha"), p.client(t), ids(20))
	assert.Less(t, p.requestCount(), 5)
}

func TestOneBadIDFailsOnlyItsCaller(t *testing.T) {
	p := newFakeProvider(t, resAnswers(10*time.Millisecond, func(id string) string {
		return map[string]string{"1": "CODE-1", "2": "ERROR_WRONG_CAPTCHA_ID", "3": "CAPCHA_NOT_READY", "4": "ERROR_CAPTCHA_UNSOLVABLE"}[id]
	}))
	codes, errs := getAll(context.Background(), p.client(t), []string{"1", "2", "3", "4"})
	require.Equal(t, 1, p.requestCount(), "one shared request")
	assert.Contains(t, p.lastRequest(t).Form.Get("ids"), ",")
	require.NoError(t, errs[0])
	assert.Equal(t, "CODE-1", codes[0])
	for i, want := range map[int]callback.Class{1: callback.ClassConfig, 2: callback.ClassNotReady, 3: callback.ClassResubmit} {
		var ce *Error
		require.ErrorAs(t, errs[i], &ce)
		assert.Equal(t, want, ce.Class, i)
		assert.Equal(t, "get", ce.Op)
	}
}

func TestIDThatCannotBeListedIsAskedAlone(t *testing.T) {
	p := newFakeProvider(t, resAnswers(10*time.Millisecond, codeOf))
	codes, errs := getAll(context.Background(), p.client(t), []string{"1,2", "3", "4"})
	require.NoError(t, errors.Join(errs...))
	assert.Equal(t, []string{"CODE-1,2", "CODE-3", "CODE-4"}, codes)
	assert.Equal(t, 2, p.requestCount())
}

func TestStatusZeroListIsSplit(t *testing.T) {
	p := newFakeProvider(t, func(r *http.Request) reply {
		time.Sleep(10 * time.Millisecond)
		return jsonReply(0, "CAPCHA_NOT_READY|CAPCHA_NOT_READY")
	})
	_, errs := getAll(context.Background(), p.client(t), []string{"1", "2"})
	assert.Equal(t, 1, p.requestCount())
	for _, err := range errs {
		assert.Equal(t, callback.ClassNotReady, ClassOf(err))
	}
}

func TestAnswerHoldingSeparatorFallsBackToOneByOne(t *testing.T) {
	p := newFakeProvider(t, resAnswers(10*time.Millisecond, func(id string) string {
		return map[string]string{"1": "a|b", "2": "c", "3": "d"}[id] // "a|b|c|d": four parts for three IDs
	}))
	codes, errs := getAll(context.Background(), p.client(t), []string{"1", "2", "3"})
	for _, err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, []string{"a|b", "c", "d"}, codes, "never a code mis-assigned")
	assert.Equal(t, 4, p.requestCount(), "the batch, then each alone")
}

func TestProviderWithoutIDsIsAskedOneByOne(t *testing.T) {
	p := newFakeProvider(t, func(r *http.Request) reply {
		time.Sleep(10 * time.Millisecond)
		if r.Form.Get("ids") != "" { // a provider without ids: one word for the request
			return jsonReply(0, "ERROR_WRONG_ID_FORMAT")
		}
		return jsonReply(1, codeOf(r.Form.Get("id")))
	})
	c := p.client(t)
	for round := range 4 {
		codes, errs := getAll(context.Background(), c, []string{"1", "2", "3"})
		for i, err := range errs {
			require.NoError(t, err)
			assert.Equal(t, codeOf(fmt.Sprint(i+1)), codes[i])
		}
		assert.Equal(t, 4*min(round+1, 3)+3*max(round-2, 0), p.requestCount(), "round %d", round)
	}
}

func TestAccountErrorOfTheBatchIsEveryCallers(t *testing.T) {
	for name, rep := range map[string]reply{
		"ban":     jsonReply(0, "ERROR: 1005"),
		"limit":   jsonReply(0, "ERROR_TOO_MUCH_REQUESTS"),
		"gateway": {status: http.StatusBadGateway, body: "<html>bad gateway</html>"},
	} {
		t.Run(name, func(t *testing.T) {
			var refuse atomic.Bool
			answers := resAnswers(10*time.Millisecond, codeOf)
			p := newFakeProvider(t, func(r *http.Request) reply {
				if refuse.Load() {
					time.Sleep(10 * time.Millisecond)
					return rep
				}
				return answers(r)
			})
			c := p.client(t)
			_, errs := getAll(context.Background(), c, ids(5)) // the provider has answered ids= once
			require.NoError(t, errors.Join(errs...))
			refuse.Store(true)
			_, errs = getAll(context.Background(), c, ids(5))
			assert.Equal(t, 2, p.requestCount(), "no request per task after the account's refusal")
			for _, err := range errs {
				assert.Equal(t, callback.ClassTransient, ClassOf(err))
				assert.NotContains(t, err.Error(), testKey)
			}
		})
	}
}

func TestUnprovenBatchErrorIsAskedOneByOne(t *testing.T) {
	p := newFakeProvider(t, func(r *http.Request) reply {
		time.Sleep(10 * time.Millisecond)
		if r.Form.Get("ids") != "" { // perhaps how a provider without ids fails: never every task's failure
			return reply{status: http.StatusInternalServerError}
		}
		return jsonReply(1, codeOf(r.Form.Get("id")))
	})
	codes, errs := getAll(context.Background(), p.client(t), []string{"1", "2"})
	require.NoError(t, errors.Join(errs...))
	assert.Equal(t, []string{"CODE-1", "CODE-2"}, codes)
}

func TestBatchTransportErrorIsRedacted(t *testing.T) {
	c, err := NewInPHP("http://"+closedAddr(t), testKey, WithTimeout(2*time.Second))
	require.NoError(t, err)
	_, errs := getAll(context.Background(), c, ids(3))
	for _, err := range errs {
		assert.True(t, IsTransportError(err), err)
		assert.NotContains(t, err.Error(), testKey)
	}
}

func TestOversizedCodeInBatchFailsOnlyItsCaller(t *testing.T) {
	p := newFakeProvider(t, resAnswers(10*time.Millisecond, func(id string) string {
		return map[string]string{"1": strings.Repeat("x", 200), "2": "ok"}[id]
	}))
	_, errs := getAll(context.Background(), p.client(t, func(c *conn) { c.maxCode = 100 }), []string{"1", "2"})
	assert.ErrorIs(t, errs[0], ErrInvalidAnswer)
	assert.NoError(t, errs[1])
}

func TestCallerCancelLeavesOthersTheirAnswers(t *testing.T) {
	p := newFakeProvider(t, resAnswers(300*time.Millisecond, codeOf))
	c := p.client(t)
	short, cancel := context.WithTimeout(ForMethod(context.Background(), "userrecaptcha"), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	var shortErr error
	var wg sync.WaitGroup
	wg.Go(func() { _, shortErr = c.Get(short, "99") })
	codes, errs := getAll(context.Background(), c, ids(10))
	wg.Wait()
	assert.ErrorIs(t, shortErr, context.DeadlineExceeded)
	assert.Equal(t, callback.ClassTransient, ClassOf(shortErr))
	assert.Less(t, time.Since(start), 2*time.Second)
	for i, id := range ids(10) {
		require.NoError(t, errs[i])
		assert.Equal(t, codeOf(id), codes[i])
	}
}

func TestLookupsLeaveNoGoroutine(t *testing.T) {
	p := newFakeProvider(t, resAnswers(5*time.Millisecond, codeOf))
	c := p.client(t)
	before := runtime.NumGoroutine()
	for range 3 {
		_, _ = getAll(context.Background(), c, ids(150))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _ = getAll(ctx, c, ids(10))
	deadline := time.Now().Add(3 * time.Second) // no assert.Eventually: its own goroutine would count
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		c.http.CloseIdleConnections() // a keep-alive connection's own goroutines are not the senders'
		p.srv.CloseClientConnections()
		time.Sleep(20 * time.Millisecond)
	}
	assert.LessOrEqual(t, runtime.NumGoroutine(), before, "the senders end once nothing waits")
}

// pollMixed runs one Get per id at once, each marked with its method (ForMethod), and checks every caller's code.
func pollMixed(t *testing.T, c *InPHP, byMethod map[string][]string, code func(id string) string) {
	var wg sync.WaitGroup
	for method, ids := range byMethod {
		for _, id := range ids {
			wg.Go(func() {
				got, err := c.Get(ForMethod(context.Background(), method), id)
				assert.NoError(t, err, id)
				assert.Equal(t, code(id), got, "never a code mis-assigned")
			})
		}
	}
	wg.Wait()
}

// batchedIDs are the IDs each res.php ids= request the provider received asked for.
func (p *fakeProvider) batchedIDs() (out [][]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.requests {
		if ids := r.Form.Get("ids"); ids != "" {
			out = append(out, strings.Split(ids, ","))
		}
	}
	return out
}

// A FunCaptcha token holds several "|" (2captcha's "…|r=eu-west-1|meta=3|…"): its lookups are never batched, so a
// batch is never asked again ID by ID, and the reCAPTCHA lookups polled with them keep sharing requests.
func TestFunCaptchaMixedWithRecaptchaKeepsBatching(t *testing.T) {
	token := func(id string) string {
		if strings.HasPrefix(id, "9") {
			return "52f7b6d0." + id + "|r=eu-west-1|meta=3|pk=B7D8911C|at=40|cdn_url=https://x"
		}
		return codeOf(id)
	}
	p := newFakeProvider(t, resAnswers(10*time.Millisecond, token))
	c := p.client(t)
	fun := []string{"9001", "9002", "9003"}
	for round := range 5 {
		before := p.requestCount()
		pollMixed(t, c, map[string][]string{"funcaptcha": fun, "userrecaptcha": ids(10)}, token)
		assert.LessOrEqual(t, p.requestCount()-before, len(fun)+1, "round %d: each FunCaptcha alone, reCAPTCHA in one request", round)
	}
	for _, batch := range p.batchedIDs() {
		assert.NotContains(t, batch, "9001", "a FunCaptcha ID is never batched")
	}
	assert.Len(t, p.batchedIDs(), 5, "the reCAPTCHA lookups shared a request every round")
}

// A method whose batches fail to split (here hCaptcha answers holding "|", against its documentation) is asked
// alone after a few misses; the reCAPTCHA lookups polled alongside keep their batches.
func TestMethodFailingToSplitDoesNotStopOthersBatching(t *testing.T) {
	code := func(id string) string {
		if strings.HasPrefix(id, "9") {
			return "P0_" + id + "|odd"
		}
		return codeOf(id)
	}
	p := newFakeProvider(t, resAnswers(10*time.Millisecond, code))
	c := p.client(t)
	for range 6 {
		pollMixed(t, c, map[string][]string{"hcaptcha": {"9001", "9002"}, "userrecaptcha": ids(10)}, code)
	}
	last := p.batchedIDs()[len(p.batchedIDs())-1]
	assert.Equal(t, ids(10), slices.Sorted(slices.Values(last)), "the last round still batched reCAPTCHA, and only it")
}
