package server

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/internal/config"
)

// Tests for issue #9, "Hostile and odd input": floods, oracles, oversized codes.

const (
	waitingWorkflowID = "victim-task"
	waitingProviderID = "7300000042"
)

// getFrom sends a GET as if from remoteAddr (host:port), optionally with extra headers.
func (e *testEnv) getFrom(t testing.TB, target, remoteAddr string, header http.Header) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	req.RemoteAddr = remoteAddr
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	e.srv.Handler().ServeHTTP(rec, req)
	return rec
}

// findsWaitingTask makes visibility know exactly one running task, waitingProviderID → waitingWorkflowID.
func findsWaitingTask(e *testEnv) {
	e.fake.listFn = func(_ context.Context, _ int) (*workflowservice.ListWorkflowExecutionsResponse, error) {
		return found(waitingWorkflowID), nil
	}
}

// testClock is a clock the test steps; the background workers read it too, hence the lock.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

// useTestClock makes e's server read a testClock (before any request, so no worker reads the old one).
func useTestClock(e *testEnv) *testClock {
	c := &testClock{now: time.Now()}
	e.srv.now = func() time.Time {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.now
	}
	return c
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func signalsTo(sent []sentSignal, workflowID string) int {
	n := 0
	for _, s := range sent {
		if s.WorkflowID == workflowID {
			n++
		}
	}
	return n
}

// TestForgedUntokenedFloodAddsAConstantNumberOfSignals: 1 000 forged untokened callbacks naming a real waiting
// task's provider ID (each with another code, from 1 000 addresses, so neither the repeat check nor the per-IP
// limit is what stops them) add at most CallbackBurst signals to its history. Before the budget, each one added a
// signal: ~800 push a workflow past the history size limit and the server terminates it.
func TestForgedUntokenedFloodAddsAConstantNumberOfSignals(t *testing.T) {
	e := newTestEnv(t, func(c *config.Ingress) { c.UntokenedQueue = 2000 })
	findsWaitingTask(e)
	for i := range 1000 {
		rec := e.getFrom(t, fmt.Sprintf("/callback?id=%s&code=forged-%d", waitingProviderID, i),
			fmt.Sprintf("203.0.%d.%d:4000", i/250, i%250), nil)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	}
	e.drainQueue(t)
	signals := e.fake.handedTo(waitingWorkflowID)
	t.Logf("1000 forged untokened callbacks → %d updates, %d lookups, %.0f suppressed", signals,
		len(e.fake.listQueries()), e.callbacks(routeUntokened, outcomeSuppressed))
	assert.LessOrEqual(t, signals, testConfig().CallbackBurst)
	assert.Positive(t, signals, "the first callbacks still go through")
	assert.Equal(t, float64(1000-signals), e.callbacks(routeUntokened, outcomeSuppressed))
	assert.LessOrEqual(t, len(e.fake.listQueries()), testConfig().CallbackBurst, "suppressed ones cost no lookup")
}

// TestForgedUntokenedFloodWithTheDefaultLimits: the same flood from one address with the shipped limits is mostly
// refused with 429 before it is parsed, still adds at most CallbackBurst signals, and other tasks' tokened
// callbacks sent during it are answered 200 at once and signalled.
func TestForgedUntokenedFloodWithTheDefaultLimits(t *testing.T) {
	t.Setenv("CALLBACK_SECRET", testSecret)
	defaults, err := config.LoadIngress()
	require.NoError(t, err)
	e := newTestEnv(t, func(c *config.Ingress) {
		c.UntokenedRate, c.UntokenedRatePerIP = defaults.UntokenedRate, defaults.UntokenedRatePerIP
		c.UntokenedQueue, c.UntokenedWorkers = defaults.UntokenedQueue, defaults.UntokenedWorkers
		c.CallbackBurst, c.CallbackRefill = defaults.CallbackBurst, defaults.CallbackRefill
	})
	findsWaitingTask(e)
	var slowest time.Duration
	for i := range 1000 {
		rec := e.getFrom(t, fmt.Sprintf("/callback?id=%s&code=forged-%d", waitingProviderID, i), "203.0.113.9:4000", nil)
		require.Contains(t, []int{http.StatusOK, http.StatusTooManyRequests}, rec.Code)
		if i%50 == 0 {
			start := time.Now()
			other := fmt.Sprint("other-", i)
			require.Equal(t, http.StatusOK, e.get(t, tokenedURL(other, testSecret, url.Values{"id": {"1"}, "code": {"c"}})).Code)
			slowest = max(slowest, time.Since(start))
			require.Equal(t, 1, signalsTo(e.fake.sent(), other))
		}
	}
	e.drainQueue(t)
	signals := e.fake.handedTo(waitingWorkflowID)
	t.Logf("1000 forged untokened callbacks from one address, default limits → %d updates, %.0f rate limited, "+
		"%.0f suppressed; other tasks' tokened callbacks: slowest answer %s", signals,
		e.callbacks(routeUntokened, outcomeRateLimited), e.callbacks(routeUntokened, outcomeSuppressed), slowest)
	assert.LessOrEqual(t, signals, defaults.CallbackBurst)
	assert.GreaterOrEqual(t, e.callbacks(routeUntokened, outcomeRateLimited), 950.0)
	assert.Less(t, slowest, 50*time.Millisecond)
}

// TestLeakedTokenFloodAddsAConstantNumberOfSignals: with a valid token for one workflow, 1 000 callbacks with
// wrong provider IDs and 1 000 exact repeats add at most CallbackBurst signals to it, while another task's real
// callbacks, interleaved with the flood, are all answered 200 at once and signalled.
func TestLeakedTokenFloodAddsAConstantNumberOfSignals(t *testing.T) {
	e := newTestEnv(t)
	var otherLatencies []time.Duration
	otherSignalled := 0
	for i := range 2000 {
		fields := url.Values{"id": {fmt.Sprintf("wrong-%d", i)}, "code": {"x"}}
		if i >= 1000 {
			fields = url.Values{"id": {waitingProviderID}, "code": {"same-code"}}
		}
		require.Equal(t, http.StatusOK, e.get(t, tokenedURL(waitingWorkflowID, testSecret, fields)).Code)
		if i%100 == 0 {
			other := fmt.Sprintf("other-task-%d", i)
			start := time.Now()
			rec := e.get(t, tokenedURL(other, testSecret, url.Values{"id": {"1"}, "code": {"real"}}))
			otherLatencies = append(otherLatencies, time.Since(start))
			require.Equal(t, http.StatusOK, rec.Code)
			otherSignalled += signalsTo(e.fake.sent(), other)
		}
	}
	signals := signalsTo(e.fake.sent(), waitingWorkflowID)
	slowest := slices.Max(otherLatencies)
	t.Logf("2000 tokened callbacks with a leaked token → %d signals (%.0f suppressed, %.0f duplicate); "+
		"other tasks: %d/%d signalled, slowest answer %s", signals, e.callbacks(routeTokened, outcomeSuppressed),
		e.callbacks(routeTokened, outcomeDuplicate), otherSignalled, len(otherLatencies), slowest)
	assert.LessOrEqual(t, signals, testConfig().CallbackBurst)
	assert.Equal(t, len(otherLatencies), otherSignalled, "every other task's real callback was signalled")
	assert.Less(t, slowest, 50*time.Millisecond)
}

// TestUntokenedAnswerTimeDoesNotTellWhetherATaskExists: the answer for a provider ID that has a running workflow
// and for one that has none comes as fast (before any lookup), with the same body. Before, an unknown ID was
// answered only after INGRESS_LOOKUP_TIMEOUT (3 s, ~9 visibility queries), a known one in microseconds.
func TestUntokenedAnswerTimeDoesNotTellWhetherATaskExists(t *testing.T) {
	e := newTestEnv(t, func(c *config.Ingress) {
		c.LookupTimeout = 3 * time.Second // the default
		c.UntokenedWorkers = 40           // so the known ones are not stuck behind the unknown ones' lookups
	})
	var mu sync.Mutex
	known := map[string]bool{}
	e.fake.listFn = func(ctx context.Context, call int) (*workflowservice.ListWorkflowExecutionsResponse, error) {
		q := e.fake.listQueries()[call-1]
		mu.Lock()
		defer mu.Unlock()
		for id := range known {
			if strings.Contains(q, "'"+id+"'") {
				return found("wf-" + id), nil
			}
		}
		return &workflowservice.ListWorkflowExecutionsResponse{}, nil
	}
	measure := func(id string) (time.Duration, string) {
		start := time.Now()
		rec := e.get(t, "/callback?id="+id+"&code=c")
		elapsed := time.Since(start)
		require.Equal(t, http.StatusOK, rec.Code)
		return elapsed, rec.Body.String()
	}
	var knownTimes, unknownTimes []time.Duration
	for i := range 20 {
		id := fmt.Sprintf("1%03d", i)
		mu.Lock()
		known[id] = true
		mu.Unlock()
		d, knownBody := measure(id)
		knownTimes = append(knownTimes, d)
		d, unknownBody := measure(fmt.Sprintf("9%03d", i))
		unknownTimes = append(unknownTimes, d)
		require.Equal(t, knownBody, unknownBody)
	}
	slices.Sort(knownTimes)
	slices.Sort(unknownTimes)
	t.Logf("answer time, known ID: median %s max %s; unknown ID: median %s max %s",
		knownTimes[len(knownTimes)/2], knownTimes[len(knownTimes)-1],
		unknownTimes[len(unknownTimes)/2], unknownTimes[len(unknownTimes)-1])
	assert.Less(t, knownTimes[len(knownTimes)-1], 50*time.Millisecond)
	assert.Less(t, unknownTimes[len(unknownTimes)-1], 50*time.Millisecond)
	// The known ones were still signalled, in the background.
	require.Eventually(t, func() bool { return e.fake.handedTo("") == 20 }, 5*time.Second, 5*time.Millisecond)
	// Stop the unknown ones' lookups rather than wait out their timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_ = e.srv.Close(ctx)
}

// TestUntokenedRateLimits: past the per-client rate a caller gets 429 with Retry-After, counted as rate_limited,
// and costs no lookup; another client still gets through until the global rate is spent too.
func TestUntokenedRateLimits(t *testing.T) {
	e := newTestEnv(t, func(c *config.Ingress) {
		c.UntokenedRatePerIP = 2 // burst 4
		c.UntokenedRate = 3      // burst 6
	})
	clock := useTestClock(e)
	next := 0
	statuses := func(remote string, n int, header http.Header) []int {
		var out []int
		for range n {
			next++
			rec := e.getFrom(t, fmt.Sprintf("/callback?id=%d&code=c", next), remote, header)
			out = append(out, rec.Code)
			if rec.Code == http.StatusTooManyRequests {
				assert.Equal(t, "1", rec.Header().Get("Retry-After"))
				requireError(t, rec, http.StatusTooManyRequests, "too many")
			}
		}
		return out
	}
	a := statuses("198.51.100.1:1111", 6, nil)
	assert.Equal(t, []int{200, 200, 200, 200, 429, 429}, a, "per-client burst of 4")
	// A spoofed X-Forwarded-For does not make a new client: no proxy is trusted.
	assert.Equal(t, []int{429}, statuses("198.51.100.1:2222", 1, http.Header{"X-Forwarded-For": {"192.0.2.77"}}))
	b := statuses("198.51.100.2:1111", 4, nil)
	assert.Equal(t, []int{200, 200, 429, 429}, b, "the global burst of 6 is spent")
	assert.Equal(t, 5.0, e.callbacks(routeUntokened, outcomeRateLimited))

	clock.advance(2 * time.Second) // refills both
	assert.Equal(t, []int{200}, statuses("198.51.100.1:1111", 1, nil))
}

func TestTrustedProxyNamesTheClient(t *testing.T) {
	e := newTestEnv(t, func(c *config.Ingress) {
		c.UntokenedRatePerIP = 0.5 // burst 1
		c.TrustedProxies = []string{"10.0.0.0/8"}
	})
	from := func(client string) int {
		return e.getFrom(t, "/callback?id=1&code="+client, "10.1.2.3:5555",
			http.Header{"X-Forwarded-For": {client}}).Code
	}
	assert.Equal(t, http.StatusOK, from("192.0.2.1"))
	assert.Equal(t, http.StatusTooManyRequests, from("192.0.2.1"))
	assert.Equal(t, http.StatusOK, from("192.0.2.2"), "behind a trusted proxy each client has its own limit")
}

func TestNewRejectsBadTrustedProxies(t *testing.T) {
	cfg := testConfig()
	cfg.TrustedProxies = []string{"10.0.0.0/8", "not-a-cidr"}
	_, err := New(cfg, &fakeTemporal{}, nil, nil)
	require.ErrorContains(t, err, `INGRESS_TRUSTED_PROXIES: "not-a-cidr"`)
}

// TestUntokenedQueueFullIsA503AndCounted: with the workers busy and the queue full, an untokened callback is
// refused with 503 (nothing accepted, the provider may retry), counted as dropped, and its budget is given back.
func TestUntokenedQueueFullIsA503AndCounted(t *testing.T) {
	e := newTestEnv(t, func(c *config.Ingress) {
		c.UntokenedQueue = 2
		c.UntokenedWorkers = 1
		c.CallbackBurst = 1
	})
	release := make(chan struct{})
	e.fake.listFn = func(ctx context.Context, _ int) (*workflowservice.ListWorkflowExecutionsResponse, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return found("wf"), nil
	}
	require.Equal(t, http.StatusOK, e.get(t, "/callback?id=1&code=c").Code)
	require.Eventually(t, func() bool { return len(e.fake.listQueries()) == 1 }, 5*time.Second, time.Millisecond,
		"the worker took the first one")
	require.Equal(t, http.StatusOK, e.get(t, "/callback?id=2&code=c").Code)
	require.Equal(t, http.StatusOK, e.get(t, "/callback?id=3&code=c").Code)
	rec := e.get(t, "/callback?id=4&code=c")
	requireError(t, rec, http.StatusServiceUnavailable, "retry later")
	assert.Equal(t, "5", rec.Header().Get("Retry-After"))
	assert.Equal(t, 1.0, e.callbacks(routeUntokened, outcomeDropped))
	assert.Contains(t, e.srv.metricsText(t), "captchaflow_ingress_untokened_queue_depth 2")

	close(release)
	require.Eventually(t, func() bool { return e.fake.handedTo("wf") == 3 }, 5*time.Second, time.Millisecond)
	require.Equal(t, http.StatusOK, e.get(t, "/callback?id=4&code=c").Code, "the refused one's budget was given back")
	e.drainQueue(t)
	assert.Equal(t, 4, e.fake.handedTo("wf"))
}

// TestShutdownDrainsTheUntokenedQueue: callbacks accepted before the stop are still looked up and signalled.
func TestShutdownDrainsTheUntokenedQueue(t *testing.T) {
	e := newTestEnv(t)
	e.fake.listFn = func(ctx context.Context, _ int) (*workflowservice.ListWorkflowExecutionsResponse, error) {
		time.Sleep(20 * time.Millisecond)
		return found("wf"), nil
	}
	base, stop, done := serve(t, e)
	for i := range 10 {
		resp, err := http.Get(fmt.Sprintf("%s/callback?id=%d&code=c", base, i))
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	stop()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("server did not stop")
	}
	assert.Equal(t, 10, e.fake.handedTo("wf"))
	assert.Equal(t, 10.0, e.callbacks(routeUntokened, outcomeSignalled))
	requireError(t, e.get(t, "/callback?id=99&code=c"), http.StatusServiceUnavailable, "retry later")
}

// TestCallbackBudgetRefills: past the burst a workflow gets one more signal per CallbackRefill.
func TestCallbackBudgetRefills(t *testing.T) {
	e := newTestEnv(t)
	clock := useTestClock(e)
	send := func(code string) {
		require.Equal(t, http.StatusOK, e.get(t, tokenedURL(testWorkflowID, testSecret, url.Values{"id": {"9"}, "code": {code}})).Code)
	}
	for i := range 6 {
		send(fmt.Sprint("burst-", i))
	}
	assert.Len(t, e.fake.sent(), 4)
	clock.advance(29 * time.Second)
	send("early")
	assert.Len(t, e.fake.sent(), 4)
	clock.advance(2 * time.Second)
	send("after-refill")
	assert.Len(t, e.fake.sent(), 5)
	assert.Equal(t, captchaflow.Callback{ProviderTaskID: "9", Code: "after-refill", Authenticated: true, RunID: testRunID, Submission: 1}, e.fake.sent()[4].Callback)
}

// TestCodeIsBoundedOnEveryRoute: a code of captchaflow.MaxCodeBytes passes, one byte more is a 400 naming `code`,
// on the query string and in urlencoded and multipart bodies, tokened and untokened.
func TestCodeIsBoundedOnEveryRoute(t *testing.T) {
	for _, size := range []int{captchaflow.MaxCodeBytes, captchaflow.MaxCodeBytes + 1} {
		code := strings.Repeat("c", size)
		for name, send := range map[string]func(e *testEnv) *httptest.ResponseRecorder{
			"tokened GET": func(e *testEnv) *httptest.ResponseRecorder {
				return e.get(t, tokenedURL(testWorkflowID, testSecret, url.Values{"id": {"9"}, "code": {code}}))
			},
			"tokened urlencoded": func(e *testEnv) *httptest.ResponseRecorder {
				return e.do(t, http.MethodPost, tokenedURL(testWorkflowID, testSecret, nil),
					formBody(url.Values{"id": {"9"}, "code": {code}}), "application/x-www-form-urlencoded")
			},
			"tokened multipart": func(e *testEnv) *httptest.ResponseRecorder {
				body, ct := multipartBody(t, map[string]string{"id": "9", "code": code})
				return e.do(t, http.MethodPost, tokenedURL(testWorkflowID, testSecret, nil), body, ct)
			},
			"untokened GET": func(e *testEnv) *httptest.ResponseRecorder {
				return e.get(t, "/callback?"+url.Values{"id": {"9"}, "code": {code}}.Encode())
			},
			"untokened multipart": func(e *testEnv) *httptest.ResponseRecorder {
				body, ct := multipartBody(t, map[string]string{"id": "9", "code": code})
				return e.do(t, http.MethodPost, "/callback", body, ct)
			},
		} {
			t.Run(fmt.Sprintf("%s %d bytes", name, size), func(t *testing.T) {
				e := newTestEnv(t, func(c *config.Ingress) { c.BodyLimit = "64K" })
				rec := send(e)
				if size <= captchaflow.MaxCodeBytes {
					require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
					return
				}
				requireError(t, rec, http.StatusBadRequest, "code: longer than 16384 bytes")
			})
		}
	}
}

func TestTTLCacheCapsEntriesAndExpires(t *testing.T) {
	now := time.Now()
	c := newTTLCache[int](3, time.Minute)
	for i := range 5 {
		c.put(fmt.Sprint(i), i, now)
	}
	assert.Equal(t, 3, c.live(now))
	_, ok := c.get("0", now)
	assert.False(t, ok, "the least recently used went first")
	_, ok = c.get("2", now) // touch 2: now 3 is the oldest
	require.True(t, ok)
	c.put("5", 5, now)
	_, ok = c.get("3", now)
	assert.False(t, ok)
	_, ok = c.get("2", now)
	assert.True(t, ok)

	later := now.Add(2 * time.Minute)
	_, ok = c.get("2", later)
	assert.False(t, ok, "expired")
	c.put("6", 6, later)
	assert.Equal(t, 1, c.live(later), "expired entries are dropped")
}

func TestSignalBudgetMemoryIsBounded(t *testing.T) {
	b := newSignalBudget(4, 30*time.Second)
	now := time.Now()
	for i := range maxBudgetKeys + 1000 {
		b.take(fmt.Sprint(i), now)
	}
	assert.Equal(t, maxBudgetKeys, b.keys.live(now))

	s := newTTLCache[struct{}](maxSeenCallbacks, seenCallbackTTL)
	for i := range maxSeenCallbacks + 1000 {
		s.add(callbackKey(routeTokened, "w", "1", fmt.Sprint(i)), now)
	}
	assert.Equal(t, maxSeenCallbacks, s.live(now))

	l := newClientRateLimit(1e9, 1e9)
	for i := range maxClientLimiters + 1000 {
		l.allow(fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), now)
	}
	assert.Equal(t, maxClientLimiters, l.activeSources(now))
}

func TestClientNetworkGroupsAnIPv6Slash64(t *testing.T) {
	assert.Equal(t, "192.0.2.1", clientNetwork("192.0.2.1"))
	assert.Equal(t, "192.0.2.1", clientNetwork("::ffff:192.0.2.1"))
	assert.Equal(t, clientNetwork("2001:db8:1:2::1"), clientNetwork("2001:db8:1:2:ffff::9"))
	assert.NotEqual(t, clientNetwork("2001:db8:1:2::1"), clientNetwork("2001:db8:1:3::1"))
	assert.Equal(t, "not-an-ip", clientNetwork("not-an-ip"))
}

// TestExactRepeatsAreSignalledOnce: a provider repeating one callback (or a replay of a captured one) signals once,
// on either route; the repeats are answered 200 and counted as duplicate.
func TestExactRepeatsAreSignalledOnce(t *testing.T) {
	e := newTestEnv(t)
	findsWaitingTask(e)
	for range 1000 {
		require.Equal(t, http.StatusOK, e.get(t, tokenedURL(waitingWorkflowID, testSecret,
			url.Values{"id": {waitingProviderID}, "code": {"real"}})).Code)
	}
	assert.Len(t, e.fake.sent(), 1)
	assert.Equal(t, 999.0, e.callbacks(routeTokened, outcomeDuplicate))

	require.Equal(t, http.StatusOK, e.get(t, "/callback?id="+waitingProviderID+"&code=real").Code)
	e.drainQueue(t)
	for range 10 {
		require.Equal(t, http.StatusOK, e.get(t, "/callback?id="+waitingProviderID+"&code=real").Code)
	}
	assert.Len(t, e.fake.sent(), 1)
	assert.Len(t, e.fake.sentUpdates(), 1, "one untokened update")
	assert.Equal(t, 10.0, e.callbacks(routeUntokened, outcomeDuplicate))
}

// TestUnknownIDFloodCostsOneLookupEach: a burst of untokened callbacks for provider IDs no task has costs one
// visibility query each, however busy or idle the queue is.
func TestUnknownIDFloodCostsOneLookupEach(t *testing.T) {
	e := newTestEnv(t, func(c *config.Ingress) {
		c.LookupTimeout = time.Second
		c.UntokenedQueue = 256
	})
	const flood = 64
	start := time.Now()
	for i := range flood {
		require.Equal(t, http.StatusOK, e.get(t, fmt.Sprintf("/callback?id=%d&code=forged", 900000+i)).Code)
	}
	e.drainQueue(t)
	took := time.Since(start)
	t.Logf("%d unknown IDs looked up with %d visibility queries in %s", flood, len(e.fake.listQueries()), took)
	assert.Equal(t, float64(flood), e.callbacks(routeUntokened, outcomeLateOrUnknown))
	assert.Len(t, e.fake.listQueries(), flood, "one query per unknown ID")
	assert.Less(t, took, time.Second)
}

// TestSelfPacingSenderCostsOneLookupPerRequest (#15 §3e): a sender that waits for each callback to be processed
// before the next keeps the queue idle. Before, an idle queue made each lookup patient — retried until
// INGRESS_LOOKUP_TIMEOUT — so one request for an unknown ID cost 9 visibility queries; now it costs one.
func TestSelfPacingSenderCostsOneLookupPerRequest(t *testing.T) {
	e := newTestEnv(t, func(c *config.Ingress) { c.LookupTimeout = 3 * time.Second }) // the default
	const requests = 5
	for i := range requests {
		require.Equal(t, http.StatusOK, e.get(t, fmt.Sprintf("/callback?id=%d&code=paced", 900000+i)).Code)
		require.Eventually(t, func() bool {
			return e.callbacks(routeUntokened, outcomeLateOrUnknown) == float64(i+1)
		}, 5*time.Second, time.Millisecond, "processed before the next is sent")
	}
	t.Logf("%d self-paced requests for unknown IDs: %d visibility queries", requests, len(e.fake.listQueries()))
	assert.Len(t, e.fake.listQueries(), requests)
}
