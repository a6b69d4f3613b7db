package sim_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/providers"
	"github.com/captchaflow/captchaflow/providers/callback"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

// The simulator speaks createTask to the real createtask client: these tests run the client against it for every
// flavor, so the two meet on the wire each flavor's profile declares.

var ctImage = base64.StdEncoding.EncodeToString(append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 200)...))

// kindInputs is one in.php input per kind.
var kindInputs = map[providers.Kind]struct {
	method string
	params map[string]string
}{
	providers.KindRecaptchaV2:           {"userrecaptcha", map[string]string{"googlekey": recaptchaSK, "pageurl": "https://example.com/login"}},
	providers.KindRecaptchaV2Enterprise: {"userrecaptcha", map[string]string{"googlekey": recaptchaSK, "pageurl": "https://example.com/", "enterprise": "1"}},
	providers.KindRecaptchaV3:           {"userrecaptcha", map[string]string{"googlekey": recaptchaSK, "pageurl": "https://example.com/", "version": "v3"}},
	providers.KindRecaptchaV3Enterprise: {"userrecaptcha", map[string]string{"googlekey": recaptchaSK, "pageurl": "https://example.com/", "version": "v3", "enterprise": "1"}},
	providers.KindHCaptcha:              {"hcaptcha", map[string]string{"sitekey": "f7de0da3-3303-44e8-ab48-fa32ff8ccc7b", "pageurl": "https://example.com/"}},
	providers.KindTurnstile:             {"turnstile", map[string]string{"sitekey": "0x4AAAA", "pageurl": "https://example.com/"}},
	providers.KindFunCaptcha:            {"funcaptcha", map[string]string{"publickey": "E8A75615-1CBA-5DFF-8031-D16BCF234E10", "pageurl": "https://example.com/"}},
	providers.KindGeeTest3:              {"geetest", map[string]string{"gt": "gt-key", "challenge": "ch", "pageurl": "https://example.com/"}},
	providers.KindGeeTest4:              {"geetest_v4", map[string]string{"captcha_id": "cid", "pageurl": "https://example.com/"}},
	providers.KindImage:                 {"base64", map[string]string{"body": ctImage}},
	providers.KindTurnstileChallenge:    {"turnstile", map[string]string{"sitekey": "0x4AAAA", "pageurl": "https://example.com/", "pagedata": "PD"}},
	providers.KindCFClearance: {"cf_clearance", map[string]string{"pageurl": "https://example.com/", "userAgent": "Mozilla/5.0 C",
		"proxy": "203.0.113.7:3128", "proxytype": "HTTP"}},
	providers.KindDataDome: {"datadome", map[string]string{"pageurl": "https://example.com/", "captcha_url": "https://geo.captcha-delivery.com/captcha/?t=fe",
		"userAgent": "Mozilla/5.0 D", "proxy": "203.0.113.7:3128", "proxytype": "HTTP"}},
	providers.KindMTCaptcha:       {"mt_captcha", map[string]string{"sitekey": "MTPublic-x", "pageurl": "https://example.com/"}},
	providers.KindFriendlyCaptcha: {"friendly_captcha", map[string]string{"sitekey": "FCMD", "pageurl": "https://example.com/"}},
	providers.KindAmazonWAF:       {"amazon_waf", map[string]string{"pageurl": "https://example.com/", "sitekey": "AQID", "iv": "IV", "context": "CTX"}},
}

func ctConfig(flavor providers.Flavor) sim.Config {
	cfg := testConfig()
	cfg.Protocol, cfg.Flavor = sim.ProtocolCreateTask, string(flavor)
	cfg.SolveMin, cfg.SolveMax = 10*time.Millisecond, 20*time.Millisecond
	return cfg
}

func ctClient(t *testing.T, h *harness, flavor providers.Flavor) *providers.CreateTask {
	t.Helper()
	c, err := providers.NewCreateTask(flavor, h.srv.URL, testKey, providers.WithTimeout(2*time.Second))
	require.NoError(t, err)
	return c
}

// callbacks records createTask callbacks (POSTs) like the ingress would.
type callbacks struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []callback.Result
	raw []string
}

func startCallbacks(t *testing.T, flavor providers.Flavor) *callbacks {
	t.Helper()
	cb := &callbacks{}
	cb.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		res, err := callback.Parse(r, flavor)
		cb.mu.Lock()
		defer cb.mu.Unlock()
		cb.raw = append(cb.raw, r.Method+" "+string(body))
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		cb.got = append(cb.got, res)
	}))
	t.Cleanup(cb.srv.Close)
	return cb
}

// wait returns the callbacks once n parsed ones arrived, or fails after waitFor.
func (cb *callbacks) wait(t *testing.T, n int) []callback.Result {
	t.Helper()
	require.Eventually(t, func() bool {
		cb.mu.Lock()
		defer cb.mu.Unlock()
		return len(cb.got) >= n
	}, waitFor, pollEvery, "callbacks: %v", cb.raw)
	cb.mu.Lock()
	defer cb.mu.Unlock()
	return append([]callback.Result(nil), cb.got...)
}

// result polls getTaskResult until the task is no longer being solved (bounded by waitFor).
func result(t *testing.T, c *providers.CreateTask, kind providers.Kind, id string) (providers.Answer, error) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		a, err := c.Answer(context.Background(), id, kind)
		if providers.ClassOf(err) != callback.ClassNotReady || time.Now().After(deadline) {
			return a, err
		}
		time.Sleep(pollEvery)
	}
}

// Every kind every flavor serves: created, solved, called back in the flavor's body, read by getTaskResult.
func TestCreateTaskEveryFlavorEveryKind(t *testing.T) {
	for _, flavor := range providers.Flavors {
		t.Run(string(flavor), func(t *testing.T) {
			h := startSim(t, ctConfig(flavor))
			c := ctClient(t, h, flavor)
			cb := startCallbacks(t, flavor)
			n := 0
			for _, kind := range providers.Kinds {
				in, served := kindInputs[kind], providers.Supports(flavor, kindInputs[kind].method, kindInputs[kind].params) == nil
				if _, ok := providers.TaskFor(flavor, kind); !ok {
					assert.False(t, served, "%s", kind)
					continue
				}
				id, _, err := c.Submit(context.Background(), in.method, in.params, cb.srv.URL+"/callback/wf-"+string(kind)+"?t=tok")
				require.NoError(t, err, "%s", kind)
				n++
				a, err := result(t, c, kind, id)
				require.NoError(t, err, "%s", kind)
				assertCode(t, kind, id, a.Code)
				task := h.task(id)
				assert.Equal(t, in.method, task.Method)
				spec, _ := providers.TaskFor(flavor, kind)
				assert.Equal(t, cmp.Or(spec.Type, spec.Proxied), task.TaskType)
				if kind.AnswersMore() && flavor != callback.AntiCaptcha { // its challenge task is its Turnstile task
					assert.Equal(t, cmp.Or(in.params["userAgent"], sim.SimUserAgent), a.UserAgent, "%s: the user agent it was solved with", kind)
				}
				if spec.Solution.Cookie != "" {
					assert.Equal(t, map[string]string{spec.Solution.Cookie: a.Code, "sim_session": "1"}, a.Cookies, "%s", kind)
				}
			}
			for _, got := range cb.wait(t, n) {
				assert.NotEmpty(t, got.Code)
			}
		})
	}
}

// assertCode: text codes are CodeFor(id); GeeTest's objects carry it in every field.
func assertCode(t *testing.T, kind providers.Kind, id, code string) {
	t.Helper()
	if kind == providers.KindGeeTest3 || kind == providers.KindGeeTest4 {
		assert.Contains(t, code, sim.CodeFor(id))
		return
	}
	assert.Equal(t, sim.CodeFor(id), code)
}

func TestCreateTaskIDsAndCallbackBodiesPerFlavor(t *testing.T) {
	for flavor, check := range map[providers.Flavor]func(t *testing.T, id, raw string){
		callback.CapSolver: func(t *testing.T, id, raw string) {
			assert.True(t, strings.HasPrefix(id, "00000000-0000-4000-8000-"), "UUID-shaped: %s", id)
			assert.Contains(t, raw, `"taskId":"`+id+`"`)
		},
		callback.TwoCaptcha: func(t *testing.T, id, raw string) {
			assert.Equal(t, "POST code="+sim.CodeFor(id)+"&id="+id, raw, "2captcha's pingback form")
		},
		callback.AntiCaptcha: func(t *testing.T, id, raw string) {
			assert.Contains(t, raw, `"taskId":`+id, "integer IDs are JSON numbers")
		},
		callback.CapMonster: func(t *testing.T, id, raw string) { // its getTaskResult answer, which names no task
			assert.JSONEq(t, `{"errorId":0,"status":"ready","solution":{"gRecaptchaResponse":"`+sim.CodeFor(id)+`"}}`, strings.TrimPrefix(raw, "POST "))
		},
	} {
		t.Run(string(flavor), func(t *testing.T) {
			h := startSim(t, ctConfig(flavor))
			cb := startCallbacks(t, flavor)
			kind := providers.KindRecaptchaV2
			if flavor == callback.TwoCaptcha {
				kind = providers.KindHCaptcha
			}
			in := kindInputs[kind]
			id, _, err := ctClient(t, h, flavor).Submit(context.Background(), in.method, in.params, cb.srv.URL+"/cb?t=tok")
			require.NoError(t, err)
			got := cb.wait(t, 1)
			assert.Equal(t, sim.CodeFor(id), got[0].Code)
			cb.mu.Lock()
			raw := cb.raw[0]
			cb.mu.Unlock()
			check(t, id, raw)
		})
	}
}

// The faults, threads and balance of the in.php model apply to createTask as they are, answered in its envelope.
func TestCreateTaskFaultsThreadsAndBalance(t *testing.T) {
	cfg := ctConfig(callback.CapSolver)
	cfg.Threads = 1
	cfg.SolveMin, cfg.SolveMax = 2*time.Second, 2*time.Second
	h := startSim(t, cfg)
	c := ctClient(t, h, callback.CapSolver)
	in := kindInputs[providers.KindTurnstile]
	submit := func(cb string) error {
		_, _, err := c.Submit(context.Background(), in.method, in.params, cb)
		return err
	}
	require.NoError(t, submit("https://hooks.example/a"))
	err := submit("https://hooks.example/b")
	assert.Equal(t, "ERROR_NO_SLOT_AVAILABLE", codeOf(err), "the thread cap")
	assert.Equal(t, callback.ClassTransient, providers.ClassOf(err))
	assert.Equal(t, 5*time.Second, callback.RetryAfter(codeOf(err)))

	require.NoError(t, h.sim.SetThreads(0))
	require.NoError(t, h.sim.SetBalance(0))
	assert.Equal(t, "ERROR_ZERO_BALANCE", codeOf(submit("https://hooks.example/c")))
	_, err = c.Balance(context.Background())
	require.NoError(t, err)
	require.NoError(t, h.sim.SetBalance(7.5))
	b, err := c.Balance(context.Background())
	require.NoError(t, err)
	assert.InDelta(t, 7.5, b, 1e-9)

	require.NoError(t, h.sim.SetFaultRules([]sim.FaultRule{{Pattern: "/lost", Faults: "submit_lost"}, {Pattern: "/config", Faults: "submit_error=config"},
		{Pattern: "/gateway", Faults: "submit_gateway_error=504"}}))
	err = submit("https://hooks.example/lost")
	assert.True(t, providers.OutcomeUnknown(err), "a lost createTask answer is outcome unknown: %v", err)
	assert.EqualValues(t, 1, h.stats().Submissions.AnswersLost, "and its task exists")
	err = submit("https://hooks.example/gateway")
	assert.True(t, providers.OutcomeUnknown(err), "a gateway's 504 after createTask is outcome unknown: %v", err)
	assert.EqualValues(t, 1, h.stats().Submissions.AnswersGatewayError, "and its task exists")
	require.NoError(t, submit("https://hooks.example/gateway"), "the resubmission is answered")
	err = submit("https://hooks.example/config")
	assert.Equal(t, "ERROR_KEY_DOES_NOT_EXIST", codeOf(err))
	assert.Equal(t, callback.ClassConfig, providers.ClassOf(err))
	var ce *providers.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, http.StatusUnauthorized, ce.HTTPStatus, "CapSolver answers a key error with 401")
}

func TestCreateTaskUnsolvable(t *testing.T) {
	for _, flavor := range []providers.Flavor{callback.AntiCaptcha, callback.CapSolver, callback.TwoCaptcha} {
		t.Run(string(flavor), func(t *testing.T) {
			h := startSim(t, ctConfig(flavor))
			require.NoError(t, h.sim.SetFaultRules([]sim.FaultRule{{Pattern: "/u", Faults: "unsolvable_pingback"}}))
			cb := startCallbacks(t, flavor)
			kind := providers.KindRecaptchaV3
			in := kindInputs[kind]
			c := ctClient(t, h, flavor)
			id, _, err := c.Submit(context.Background(), in.method, in.params, cb.srv.URL+"/u?t=tok")
			require.NoError(t, err)
			_, err = result(t, c, kind, id)
			assert.Equal(t, callback.ClassResubmit, providers.ClassOf(err), "%v", err)
			got := cb.wait(t, 1)
			assert.Equal(t, callback.ClassResubmit, callback.ClassifyCode(got[0].Code), got[0].Code)
		})
	}
}

func TestCreateTaskReportsReachTheTask(t *testing.T) {
	h := startSim(t, ctConfig(callback.AntiCaptcha))
	c := ctClient(t, h, callback.AntiCaptcha)
	in := kindInputs[providers.KindRecaptchaV2]
	id, _, err := c.Submit(context.Background(), in.method, in.params, "")
	require.NoError(t, err)
	_, err = result(t, c, providers.KindRecaptchaV2, id)
	require.NoError(t, err)
	require.NoError(t, c.Report(context.Background(), providers.KindRecaptchaV2, id, false))
	assert.EqualValues(t, 1, h.task(id).ReportsBad)
	err = c.Report(context.Background(), providers.KindRecaptchaV2, id, true)
	assert.Equal(t, sim.ErrorDuplicateReport, codeOf(err), "one report per task")
	assert.ErrorIs(t, c.Report(context.Background(), providers.KindTurnstile, id, true), providers.ErrReportUnsupported)
	err = c.Report(context.Background(), providers.KindRecaptchaV2, "999", false)
	assert.Equal(t, "ERROR_NO_SUCH_CAPCHA_ID", codeOf(err))

	hs := startSim(t, ctConfig(callback.CapSolver))
	cs := ctClient(t, hs, callback.CapSolver)
	id, _, err = cs.Submit(context.Background(), in.method, in.params, "")
	require.NoError(t, err)
	require.NoError(t, cs.Report(context.Background(), providers.KindRecaptchaV2, id, true))
	assert.EqualValues(t, 1, hs.task(id).ReportsGood, "feedbackTask with invalid=false is a good verdict")
	assert.EqualValues(t, 1, hs.stats().ResCalls["reportgood"])
}

// CapSolver answers image recognition within createTask.
func TestCreateTaskSyncImage(t *testing.T) {
	h := startSim(t, ctConfig(callback.CapSolver))
	c := ctClient(t, h, callback.CapSolver)
	id, code, err := c.Submit(context.Background(), "base64", map[string]string{"body": ctImage}, "")
	require.NoError(t, err)
	assert.Equal(t, sim.CodeFor(id), code)
}

func TestCreateTaskRefusesWhatTheFlavorRefuses(t *testing.T) {
	h := startSim(t, ctConfig(callback.AntiCaptcha))
	for body, want := range map[string]string{
		`{"clientKey":"` + testKey + `"}`:                                                             sim.ErrorTaskAbsent,
		`{"clientKey":"` + testKey + `","task":{"type":"HCaptchaTaskProxyless"}}`:                     sim.ErrorTaskNotSupported,
		`{"clientKey":"` + testKey + `","task":{"type":"RecaptchaV2TaskProxyless","websiteKey":"k"}}`: sim.ErrorBadParameters,
		`{"clientKey":"` + unknownKey + `","task":{"type":"ImageToTextTask","body":"x"}}`:             sim.ErrorKeyDoesNotExist,
		`{"clientKey":"` + testKey + `","task":{"type":"ImageToTextTask","body":"aGVsbG8="}}`:         sim.ErrorZeroCaptchaFilesize,
		`not json`: sim.ErrorBadParameters,
	} {
		resp, err := http.Post(h.srv.URL+"/createTask", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		got := readOK(t, resp)
		assert.Contains(t, got, `"errorCode":"`+want+`"`, body)
		assert.Contains(t, got, `"errorId":1`)
	}
	assert.Empty(t, allTasks(h))
	resp, err := http.Get(h.srv.URL + "/in.php?key=" + testKey)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "one protocol per process")
}

// SIM_REFUSE: a provider that lacks a task type refuses it as the real ones do, creating nothing: createTask with
// ERROR_TASK_NOT_SUPPORTED for the type, in.php with ERROR_NO_SUCH_METHOD for the method; other types are taken.
func TestRefusedTaskTypes(t *testing.T) {
	cfg := ctConfig(callback.AntiCaptcha)
	cfg.Refuse = []string{"RecaptchaV2TaskProxyless"}
	h := startSim(t, cfg)
	c := ctClient(t, h, callback.AntiCaptcha)
	v2, turnstile := kindInputs[providers.KindRecaptchaV2], kindInputs[providers.KindTurnstile]
	_, _, err := c.Submit(context.Background(), v2.method, v2.params, "https://hooks.example/a")
	assert.Equal(t, sim.ErrorTaskNotSupported, codeOf(err))
	assert.Empty(t, allTasks(h))
	_, _, err = c.Submit(context.Background(), turnstile.method, turnstile.params, "https://hooks.example/b")
	require.NoError(t, err, "a type not listed is taken")

	cfg = testConfig()
	cfg.Refuse = []string{"userrecaptcha"}
	resp, err := http.PostForm(startSim(t, cfg).srv.URL+"/in.php", url.Values{"key": {testKey}, "method": {"userrecaptcha"},
		"googlekey": {"k"}, "pageurl": {"https://x.example"}})
	require.NoError(t, err)
	assert.Contains(t, readOK(t, resp), sim.ErrorNoSuchMethod)
	t.Setenv("SIM_REFUSE", "userrecaptcha,ReCaptchaV2TaskProxyLess")
	cfg, err = sim.ConfigFromEnv()
	require.NoError(t, err)
	assert.Equal(t, []string{"userrecaptcha", "ReCaptchaV2TaskProxyLess"}, cfg.Refuse)
}

func TestConfigProtocolAndFlavor(t *testing.T) {
	cfg := sim.DefaultConfig()
	assert.Equal(t, sim.ProtocolInPHP, cfg.Protocol)
	cfg.Protocol, cfg.Flavor = "soap", "deathbycaptcha"
	err := cfg.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "protocol")
	assert.Contains(t, err.Error(), "flavor")
	t.Setenv("SIM_PROTOCOL", sim.ProtocolCreateTask)
	t.Setenv("SIM_FLAVOR", "capmonster")
	cfg, err = sim.ConfigFromEnv()
	require.NoError(t, err)
	assert.Equal(t, "capmonster", cfg.Flavor)
}

func codeOf(err error) string {
	var ce *providers.Error
	if errors.As(err, &ce) {
		return ce.Code
	}
	return ""
}
