package providers

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/providers/callback"
)

var recaptchaParams = map[string]string{"googlekey": "6Le-site", "pageurl": "https://example.com/login"}

func TestNewCreateTaskValidates(t *testing.T) {
	c, err := NewCreateTask(callback.CapSolver, "", testKey)
	require.NoError(t, err)
	assert.Equal(t, "https://api.capsolver.com", c.base.String(), "no base URL is the flavor's documented host")
	for _, base := range []string{"ftp://x", "http://", "https://u:" + testKey + "@h/", "https://h/?key=" + testKey, "::bad::"} {
		_, err := NewCreateTask(callback.AntiCaptcha, base, testKey)
		require.Error(t, err, base)
		assert.NotContains(t, err.Error(), testKey)
	}
	_, err = NewCreateTask(callback.AntiCaptcha, "", "")
	require.Error(t, err)
	_, err = NewCreateTask("deathbycaptcha", "", testKey)
	require.Error(t, err)
}

// createTask sends the key, the mapped task and the callback in a JSON body, and keeps an integer ID's digits.
func TestCreateSendsTheMappedTask(t *testing.T) {
	p := newFake(t, ctAlways(200, `{"errorId":0,"taskId":72345678901}`))
	id, _, err := p.client(t, callback.AntiCaptcha).Submit(context.Background(), "userrecaptcha", recaptchaParams, "https://hooks.example/cb/wf?t=tok")
	require.NoError(t, err)
	assert.Equal(t, "72345678901", id)
	r := p.last(t)
	assert.Equal(t, "/createTask", r.path)
	assert.JSONEq(t, `"`+testKey+`"`, string(r.body["clientKey"]))
	assert.JSONEq(t, `"https://hooks.example/cb/wf?t=tok"`, string(r.body["callbackUrl"]))
	assert.JSONEq(t, `{"type":"RecaptchaV2TaskProxyless","websiteURL":"https://example.com/login","websiteKey":"6Le-site"}`, string(r.body["task"]))
}

func TestCreateWithoutCallbackOmitsIt(t *testing.T) {
	p := newFake(t, ctAlways(200, `{"errorId":0,"taskId":"37223a89-06ed-442c-a0b8-22067b79c5b4"}`))
	id, _, err := p.client(t, callback.CapSolver).Submit(context.Background(), "userrecaptcha", recaptchaParams, "")
	require.NoError(t, err)
	assert.Equal(t, "37223a89-06ed-442c-a0b8-22067b79c5b4", id, "CapSolver's UUID task ID is kept as a string")
	assert.NotContains(t, p.last(t).body, "callbackUrl")
}

// A task the flavor cannot serve is refused before anything is sent.
func TestUnsupportedIsNeverSent(t *testing.T) {
	p := newFake(t, ctAlways(200, `{"errorId":0,"taskId":1}`))
	for name, tc := range map[string]struct {
		flavor Flavor
		method string
		params map[string]string
	}{
		"unknown method":          {callback.AntiCaptcha, "keycaptcha", map[string]string{"pageurl": "https://x"}},
		"kind not served":         {callback.AntiCaptcha, "hcaptcha", map[string]string{"sitekey": "s", "pageurl": "https://x"}},
		"param without a field":   {callback.CapMonster, "userrecaptcha", map[string]string{"googlekey": "k", "pageurl": "https://x", "cookies": "a=b"}},
		"recaptcha version v4":    {callback.CapSolver, "userrecaptcha", map[string]string{"googlekey": "k", "pageurl": "https://x", "version": "v4"}},
		"v3 score capsolver lack": {callback.CapSolver, "userrecaptcha", map[string]string{"googlekey": "k", "pageurl": "https://x", "version": "v3", "min_score": "0.9"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := p.client(t, tc.flavor).Submit(context.Background(), tc.method, tc.params, "")
			require.ErrorIs(t, err, ErrUnsupported)
			assert.Equal(t, callback.ClassConfig, ClassOf(err))
			assert.False(t, OutcomeUnknown(err))
			assert.ErrorIs(t, Supports(tc.flavor, tc.method, tc.params), ErrUnsupported)
		})
	}
	assert.Empty(t, p.requests())
}

func TestBadParamsAreConfigErrorsNamingTheParam(t *testing.T) {
	p := newFake(t, ctAlways(200, `{"errorId":0,"taskId":1}`))
	for params, want := range map[*map[string]string]string{
		{"pageurl": "https://x"}: "params.googlekey: required",
		{"googlekey": "k", "pageurl": "https://x", "invisible": "yes"}: "params.invisible",
		{"googlekey": "k", "pageurl": "https://x", "enterprise": "2"}:  "params.enterprise",
	} {
		_, _, err := p.client(t, callback.AntiCaptcha).Submit(context.Background(), "userrecaptcha", *params, "")
		require.Error(t, err)
		assert.Contains(t, err.Error(), want)
		assert.Equal(t, callback.ClassConfig, ClassOf(err))
	}
	_, _, err := p.client(t, callback.AntiCaptcha).Submit(context.Background(), "base64", map[string]string{"body": "%%%"}, "")
	assert.ErrorContains(t, err, "params.body")
	assert.Empty(t, p.requests())
}

// The same codes get the same classes and waits as on in.php.
func TestErrorCodesClassifyLikeInPHP(t *testing.T) {
	for code, want := range map[string]struct {
		class callback.Class
		wait  time.Duration
	}{
		"ERROR_NO_SLOT_AVAILABLE":    {callback.ClassTransient, 5 * time.Second},
		"ERROR_ZERO_BALANCE":         {callback.ClassTransient, 60 * time.Second},
		"ERROR_TOO_MUCH_REQUESTS":    {callback.ClassTransient, 10 * time.Second},
		"ERROR_CAPTCHA_UNSOLVABLE":   {callback.ClassResubmit, 0},
		"ERROR_CAPTCHA_SOLVE_FAILED": {callback.ClassResubmit, 0},
		"ERROR_KEY_DOES_NOT_EXIST":   {callback.ClassConfig, 0},
		"ERROR_IP_BLOCKED":           {callback.ClassTransient, 5 * time.Minute},
		"ERROR_TASK_NOT_SUPPORTED":   {callback.ClassUnsupported, 0}, // another provider may take the type
		"ERROR_WRONG_GOOGLEKEY":      {callback.ClassConfig, 0},      // the task itself: no provider can
		"ERROR_RATE_LIMIT":           {callback.ClassTransient, 10 * time.Second},
		"ERROR_SOMETHING_NEW":        {callback.ClassUnknown, 0},
	} {
		p := newFake(t, ctAlways(200, `{"errorId":1,"errorCode":"`+code+`","errorDescription":"d"}`))
		_, _, err := p.client(t, callback.AntiCaptcha).Submit(context.Background(), "userrecaptcha", recaptchaParams, "")
		var ce *Error
		require.ErrorAs(t, err, &ce)
		assert.Equal(t, code, ce.Code)
		assert.Equal(t, want.class, ce.Class, code)
		assert.Equal(t, want.wait, callback.RetryAfter(code), code)
		assert.False(t, OutcomeUnknown(err), "%s is an answer: a known outcome", code)
	}
}

// callback.CapSolver answers errors with HTTP 400/401 and the envelope (https://docs.capsolver.com/guide/api-error).
func TestErrorEnvelopeWithAnErrorStatus(t *testing.T) {
	p := newFake(t, ctAlways(400, `{"errorId":1,"errorCode":"ERROR_INVALID_TASK_DATA","errorDescription":"invalid task data"}`))
	_, _, err := p.client(t, callback.CapSolver).Submit(context.Background(), "userrecaptcha", recaptchaParams, "")
	var ce *Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "ERROR_INVALID_TASK_DATA", ce.Code)
	assert.Equal(t, callback.ClassConfig, ce.Class)

	p = newFake(t, ctAlways(401, `{"errorId":1,"errorCode":"ERROR_KEY_DENIED_ACCESS","errorDescription":"key `+testKey+` denied"}`))
	_, _, err = p.client(t, callback.CapSolver).Submit(context.Background(), "userrecaptcha", recaptchaParams, "")
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, callback.ClassConfig, ce.Class, "an undocumented code on 401 is the key's fault")
	assert.NotContains(t, err.Error(), testKey)
}

func TestSuccessWithoutAValidTaskIDIsInvalid(t *testing.T) {
	for _, body := range []string{`{"errorId":0}`, `{"errorId":0,"taskId":-5}`, `{"errorId":0,"taskId":"a/b"}`, `{"errorId":0,"taskId":1.5}`} {
		p := newFake(t, ctAlways(200, body))
		_, _, err := p.client(t, callback.AntiCaptcha).Submit(context.Background(), "userrecaptcha", recaptchaParams, "")
		require.ErrorIs(t, err, ErrInvalidAnswer, body)
		assert.Equal(t, callback.ClassUnknown, ClassOf(err), "never retried: the task may exist")
	}
}

// getTaskResult sends the ID back as the flavor wants it and reads each status.
func TestResult(t *testing.T) {
	ctx := context.Background()
	p := newFake(t, ctAlways(200, `{"errorId":0,"status":"ready","solution":{"gRecaptchaResponse":"03AGdBq25"},"cost":"0.001"}`))
	code, err := p.client(t, callback.CapMonster).Get(ctx, "7654321")
	require.NoError(t, err)
	assert.Equal(t, "03AGdBq25", code)
	assert.Equal(t, "/getTaskResult", p.last(t).path)
	assert.Equal(t, "7654321", string(p.last(t).body["taskId"]), "an integer ID goes back as a JSON number")

	p = newFake(t, ctAlways(200, `{"errorId":0,"status":"ready","solution":{"token":"TOK"}}`))
	_, err = p.client(t, callback.CapSolver).Get(ctx, "37223a89-06ed-442c-a0b8-22067b79c5b4")
	require.NoError(t, err)
	assert.Equal(t, `"37223a89-06ed-442c-a0b8-22067b79c5b4"`, string(p.last(t).body["taskId"]))

	for body, class := range map[string]callback.Class{
		`{"errorId":0,"status":"processing"}`:                                      callback.ClassNotReady,
		`{"errorId":0,"status":"idle"}`:                                            callback.ClassNotReady,
		`{"errorId":1,"errorCode":"ERROR_CAPTCHA_SOLVE_FAILED","status":"failed"}`: callback.ClassResubmit,
		`{"errorId":0,"status":"failed"}`:                                          callback.ClassResubmit,
		`{"errorId":0,"status":"ready","solution":{}}`:                             callback.ClassUnknown,
		`{"errorId":0,"status":"ready","solution":{"token":""}}`:                   callback.ClassUnknown,
		`{"errorId":0,"status":"weird"}`:                                           callback.ClassTransient,
		`{"errorId":1,"errorCode":"ERROR_NO_SUCH_CAPCHA_ID"}`:                      callback.ClassConfig,
	} {
		p := newFake(t, ctAlways(200, body))
		_, err := p.client(t, callback.CapSolver).Get(ctx, "abc")
		assert.Equal(t, class, ClassOf(err), body)
	}
	_, err = newFake(t, ctAlways(200, `{}`)).client(t, callback.AntiCaptcha).Get(ctx, "not-a-number")
	assert.Equal(t, callback.ClassConfig, ClassOf(err), "an integer-ID flavor refuses another ID unsent")
}

// Get recognises the solution's shape; GeeTest's comes back as res.php's JSON object.
func TestGetInfersTheSolutionShape(t *testing.T) {
	for body, want := range map[string]string{
		`{"errorId":0,"status":"ready","solution":{"gRecaptchaResponse":"03A"}}`:                                                                    "03A",
		`{"errorId":0,"status":"ready","solution":{"text":"deditur","url":"http://61.39.233.233/1/147220556452507.jpg"}}`:                           "deditur",
		`{"errorId":0,"status":"ready","solution":{"token":"T"}}`:                                                                                   "T",
		`{"errorId":0,"status":"ready","solution":{"challenge":"c","validate":"v","seccode":"s"}}`:                                                  `{"geetest_challenge":"c","geetest_validate":"v","geetest_seccode":"s"}`,
		`{"errorId":0,"status":"ready","solution":{"captcha_id":"i","lot_number":"l","pass_token":"p","gen_time":1700000000,"captcha_output":"o"}}`: `{"captcha_id":"i","lot_number":"l","pass_token":"p","gen_time":"1700000000","captcha_output":"o"}`,
	} {
		code, err := newFake(t, ctAlways(200, body)).client(t, callback.AntiCaptcha).Get(context.Background(), "12345")
		require.NoError(t, err, body)
		assert.Equal(t, want, code)
	}
	_, err := newFake(t, ctAlways(200, `{"errorId":0,"status":"ready","solution":{"gRecaptchaResponse":"`+strings.Repeat("a", 300)+`"}}`)).
		client(t, callback.AntiCaptcha, withMaxCode(64)).Get(context.Background(), "1")
	assert.ErrorIs(t, err, ErrInvalidAnswer, "a code over the bound is refused")
}

// CapSolver answers image recognition within createTask: Submit returns the code; a task createTask only
// accepted comes back without one, and the workflow waits for it.
func TestSubmitReturnsASolutionThatCameWithCreateTask(t *testing.T) {
	c := newFake(t, ctAlways(200, `{"errorId":0,"status":"ready","solution":{"text":"44795sds"},"taskId":"2376919c-1863-11ec-a012-94e6f7355a0b"}`)).client(t, callback.CapSolver)
	id, code, err := c.Submit(context.Background(), "base64", map[string]string{"body": pngB64}, "")
	require.NoError(t, err)
	assert.Equal(t, "2376919c-1863-11ec-a012-94e6f7355a0b", id)
	assert.Equal(t, "44795sds", code)

	c = newFake(t, ctAlways(200, `{"errorId":0,"taskId":"2376919c-1863-11ec-a012-94e6f7355a0b"}`)).client(t, callback.CapSolver)
	id, code, err = c.Submit(context.Background(), "base64", map[string]string{"body": pngB64}, "")
	require.NoError(t, err)
	assert.Equal(t, "2376919c-1863-11ec-a012-94e6f7355a0b", id)
	assert.Empty(t, code)
}

func TestCreateTaskBalance(t *testing.T) {
	b, err := newFake(t, ctAlways(200, `{"errorId":0,"balance":3.5}`)).client(t, callback.TwoCaptcha).Balance(context.Background())
	require.NoError(t, err)
	assert.InDelta(t, 3.5, b, 1e-9)
	_, err = newFake(t, ctAlways(200, `{"errorId":0,"balance":"lots"}`)).client(t, callback.TwoCaptcha).Balance(context.Background())
	assert.Equal(t, callback.ClassTransient, ClassOf(err))
}

// Reports go to the flavor's call for the verdict and kind; one it has no call for is never sent.
func TestReportRouting(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		flavor Flavor
		kind   Kind
		good   bool
		path   string // "" = unsupported
	}{
		{callback.AntiCaptcha, KindRecaptchaV3, false, "/reportIncorrectRecaptcha"},
		{callback.AntiCaptcha, KindRecaptchaV2Enterprise, true, "/reportCorrectRecaptcha"},
		{callback.AntiCaptcha, KindImage, false, "/reportIncorrectImageCaptcha"},
		{callback.AntiCaptcha, KindTurnstile, false, ""},
		{callback.AntiCaptcha, KindImage, true, ""},
		{callback.TwoCaptcha, KindHCaptcha, false, "/reportIncorrect"},
		{callback.TwoCaptcha, KindHCaptcha, true, ""},
		{callback.CapMonster, KindTurnstile, false, "/reportIncorrectTokenCaptcha"},
		{callback.CapMonster, KindImage, false, ""},
		{callback.CapSolver, KindImage, true, "/feedbackTask"},
	}
	for _, tc := range cases {
		p := newFake(t, ctAlways(200, `{"errorId":0,"status":"success"}`))
		err := p.client(t, tc.flavor).Report(ctx, tc.kind, "1234", tc.good)
		if tc.path == "" {
			require.ErrorIs(t, err, ErrReportUnsupported, "%+v", tc)
			assert.Empty(t, p.requests())
			continue
		}
		require.NoError(t, err, "%+v", tc)
		assert.Equal(t, tc.path, p.last(t).path)
	}
	p := newFake(t, ctAlways(200, `{"errorId":0,"message":"ok"}`))
	require.NoError(t, p.client(t, callback.CapSolver).Report(ctx, KindRecaptchaV2, "37223a89", false))
	assert.JSONEq(t, `{"invalid":true}`, string(p.last(t).body["result"]))
	err := newFake(t, ctAlways(200, `{"errorId":16,"errorCode":"ERROR_NO_SUCH_CAPCHA_ID"}`)).client(t, callback.AntiCaptcha).Report(ctx, KindRecaptchaV2, "1", false)
	assert.Equal(t, callback.ClassConfig, ClassOf(err), "past Anti-Captcha's 60 s window")
}

func TestProviderTextNeverLeaksTheKey(t *testing.T) {
	p := newFake(t, ctAlways(200, `{"errorId":1,"errorCode":"ERROR_KEY_DOES_NOT_EXIST","errorDescription":"key `+testKey+` not found"}`))
	_, _, err := p.client(t, callback.AntiCaptcha).Submit(context.Background(), "userrecaptcha", recaptchaParams, "")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), testKey)
	assert.Contains(t, err.Error(), "REDACTED")
}

func TestPollInterval(t *testing.T) {
	cm, _ := ProfileOf(callback.CapMonster)
	assert.Equal(t, 2*time.Second, cm.MinPollInterval, "CapMonster: at most every 2 s")
	cs, _ := ProfileOf(callback.CapSolver)
	assert.Equal(t, 3*time.Second, cs.MinPollInterval)
}

func TestClassOfPlainErrors(t *testing.T) {
	assert.Equal(t, callback.ClassTransient, ClassOf(context.DeadlineExceeded))
	assert.Equal(t, callback.ClassUnknown, ClassOf(errors.New("x")))
	assert.Equal(t, callback.ClassConfig, callback.ClassifyCode("error_task_absent "), "case and spaces are ignored")
	_, known := callback.KnownCode("ERROR_CAPTCHA_SOLVE_FAILED")
	assert.True(t, known)
	_, known = callback.KnownCode("ERROR_NO_SLOT_AVAILABLE")
	assert.True(t, known, "the in.php family's codes are known too")
	_ = http.StatusOK
}

// getTaskResult's cost (a number, or one in a string) comes back with the code; one that is no price is 0.
func TestResultCost(t *testing.T) {
	ctx := context.Background()
	for cost, want := range map[string]float64{`"0.00150"`: 0.0015, `0.002`: 0.002, `"NaN"`: 0, `-1`: 0, `"free"`: 0, `null`: 0} {
		p := newFake(t, ctAlways(200, `{"errorId":0,"status":"ready","solution":{"gRecaptchaResponse":"03AG"},"cost":`+cost+`}`))
		a, err := p.client(t, callback.AntiCaptcha).Answer(ctx, "7654321", "")
		require.NoError(t, err)
		assert.Equal(t, "03AG", a.Code)
		assert.InDelta(t, want, a.CostUSD, 1e-12, cost)
	}
}

// CapMonster's ERROR_TOO_MUCH_REQUESTS on getTaskResult is one task's polls (at most one per 2 s): that task is not
// ready yet, and the account is not refused; elsewhere the word is the account's rate refusal.
func TestOneTasksPollLimitIsNotTheAccounts(t *testing.T) {
	body := `{"errorId":1,"errorCode":"ERROR_TOO_MUCH_REQUESTS"}`
	_, err := newFake(t, ctAlways(200, body)).client(t, callback.CapMonster).Get(context.Background(), "12345")
	_, rate := RateLimited(err)
	assert.Equal(t, callback.ClassNotReady, ClassOf(err))
	assert.False(t, rate, "not the account's refusal")
	_, err = newFake(t, ctAlways(200, body)).client(t, callback.AntiCaptcha).Get(context.Background(), "12345")
	_, rate = RateLimited(err)
	assert.True(t, rate, "Anti-Captcha's: the account's")
}

// A kind that answers more than a token: getTaskResult's user agent and cookies come back with the code, a cookie
// kind's code is the cookie's value, and createTask's own answer never stands in for them (the workflow polls).
func TestAnswerCarriesUserAgentAndCookies(t *testing.T) {
	sol := `{"errorId":0,"status":"ready","taskId":7654321,"solution":{"domains":{"www.site.example":{"cookies":{"datadome":"P1w0"}}},"userAgent":"Mozilla/5.0 D"}}`
	p := newFake(t, ctAlways(200, sol))
	a, err := p.client(t, callback.CapMonster).Answer(context.Background(), "7654321", KindDataDome)
	require.NoError(t, err)
	assert.Equal(t, Answer{Code: "P1w0", UserAgent: "Mozilla/5.0 D", Cookies: map[string]string{"datadome": "P1w0"}}, a)
	params := map[string]string{"pageurl": "https://site.example/", "captcha_url": "https://geo.captcha-delivery.com/captcha/?t=fe",
		"userAgent": "Mozilla/5.0 D", "proxy": "203.0.113.7:3128", "proxytype": "HTTP"}
	id, code, err := p.client(t, callback.CapMonster).Submit(context.Background(), "datadome", params, "")
	require.NoError(t, err)
	assert.Equal(t, "7654321", id)
	assert.Empty(t, code, "a ready createTask answer is read again with getTaskResult, user agent and cookies included")
}
