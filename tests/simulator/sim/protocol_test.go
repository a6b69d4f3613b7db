package sim_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

type protocolDoc struct {
	Status    int    `json:"status"`
	Request   string `json:"request"`
	ErrorText string `json:"error_text"`
}

func decodeDoc(t *testing.T, body string) protocolDoc {
	t.Helper()
	var doc protocolDoc
	require.NoError(t, json.Unmarshal([]byte(body), &doc), "body %q", body)
	return doc
}

var taskIDPattern = regexp.MustCompile(`^\d{10}$`)

func TestInPHPAcceptsEveryTransportInBothFormats(t *testing.T) {
	h := startSim(t, testConfig())
	image := bytes.Repeat([]byte{0x89}, 200)

	plain := h.call("/in.php", recaptchaParams("", nil))
	id, ok := cutOK(plain)
	require.True(t, ok, plain)
	assert.Regexp(t, taskIDPattern, id)

	params := recaptchaParams("", url.Values{"json": {"1"}})
	doc := decodeDoc(t, h.post("/in.php", params))
	assert.Equal(t, 1, doc.Status)
	assert.Regexp(t, taskIDPattern, doc.Request)
	assert.Empty(t, doc.ErrorText)

	doc = decodeDoc(t, h.postFile(url.Values{"key": {testKey}, "method": {"post"}, "json": {"1"}}, "captcha.png", image))
	assert.Equal(t, 1, doc.Status, doc.ErrorText)

	b64 := base64.StdEncoding.EncodeToString(image)
	_, ok = cutOK(h.post("/in.php", url.Values{"key": {testKey}, "method": {"base64"}, "body": {b64}}))
	assert.True(t, ok)

	for _, p := range []url.Values{
		{"method": {"hcaptcha"}, "sitekey": {"s"}, "pageurl": {"https://e.com"}},
		{"method": {"turnstile"}, "sitekey": {"s"}, "pageurl": {"https://e.com"}},
		{"method": {"geetest"}, "gt": {"g"}, "challenge": {"c"}, "pageurl": {"https://e.com"}},
		{"method": {"funcaptcha"}, "publickey": {"p"}, "pageurl": {"https://e.com"}},
		{"method": {"geetest_v4"}, "captcha_id": {"c"}, "pageurl": {"https://e.com"}},
	} {
		p.Set("key", testKey)
		body := h.call("/in.php", p)
		_, ok := cutOK(body)
		assert.True(t, ok, "method %s: %q", p.Get("method"), body)
	}
	assert.EqualValues(t, 9, h.stats().Submissions.Accepted)
}

func TestInPHPRejectsBadKeysMethodsAndParams(t *testing.T) {
	h := startSim(t, testConfig())
	image := bytes.Repeat([]byte{1}, 200)
	cases := []struct {
		name   string
		params url.Values
		want   string
	}{
		{"missing key", url.Values{"method": {"userrecaptcha"}}, sim.ErrorWrongUserKey},
		{"short key", url.Values{"key": {"abc"}, "method": {"userrecaptcha"}}, sim.ErrorWrongUserKey},
		{"unknown key", url.Values{"key": {unknownKey}, "method": {"userrecaptcha"}}, sim.ErrorKeyDoesNotExist},
		{"no method", url.Values{"key": {testKey}}, sim.ErrorNoSuchMethod},
		{"unknown method", url.Values{"key": {testKey}, "method": {"nope"}}, sim.ErrorNoSuchMethod},
		{"recaptcha without googlekey", url.Values{"key": {testKey}, "method": {"userrecaptcha"}, "pageurl": {"https://e.com"}}, sim.ErrorGoogleKey},
		{"recaptcha without pageurl", url.Values{"key": {testKey}, "method": {"userrecaptcha"}, "googlekey": {"k"}}, sim.ErrorPageURL},
		{"hcaptcha without sitekey", url.Values{"key": {testKey}, "method": {"hcaptcha"}, "pageurl": {"https://e.com"}}, sim.ErrorBadParameters},
		{"turnstile without pageurl", url.Values{"key": {testKey}, "method": {"turnstile"}, "sitekey": {"s"}}, sim.ErrorPageURL},
		{"geetest without challenge", url.Values{"key": {testKey}, "method": {"geetest"}, "gt": {"g"}, "pageurl": {"https://e.com"}}, sim.ErrorBadParameters},
		{"funcaptcha without publickey", url.Values{"key": {testKey}, "method": {"funcaptcha"}, "pageurl": {"https://e.com"}}, sim.ErrorBadParameters},
		{"base64 without body", url.Values{"key": {testKey}, "method": {"base64"}}, sim.ErrorZeroCaptchaFilesize},
		{"base64 too small", url.Values{"key": {testKey}, "method": {"base64"}, "body": {"aGVsbG8="}}, sim.ErrorZeroCaptchaFilesize},
		{"base64 not base64", url.Values{"key": {testKey}, "method": {"base64"}, "body": {"%%%not-base64%%%"}}, sim.ErrorUpload},
		{"post without file", url.Values{"key": {testKey}, "method": {"post"}}, sim.ErrorZeroCaptchaFilesize},
		{"relative pingback", recaptchaParams("/callback/x", nil), sim.ErrorBadParameters},
		{"unknown sim fault", recaptchaParams("", url.Values{"sim_fault": {"explode"}}), sim.ErrorBadParameters},
		{"bad sim_solve_ms", recaptchaParams("", url.Values{"sim_solve_ms": {"-1"}}), sim.ErrorBadParameters},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, h.call("/in.php", tc.params), "plain answer is the bare code")
			p := url.Values{"json": {"1"}}
			for k, v := range tc.params {
				p[k] = v
			}
			doc := decodeDoc(t, h.post("/in.php", p))
			assert.Equal(t, 0, doc.Status)
			assert.Equal(t, tc.want, doc.Request)
			assert.NotEmpty(t, doc.ErrorText)
		})
	}
	t.Run("post with a wrong extension", func(t *testing.T) {
		assert.Equal(t, sim.ErrorWrongFileExtension,
			h.postFile(url.Values{"key": {testKey}, "method": {"post"}}, "captcha.exe", image))
	})
	t.Run("post with a too big file", func(t *testing.T) {
		assert.Equal(t, sim.ErrorTooBigCaptchaFilesize,
			h.postFile(url.Values{"key": {testKey}, "method": {"post"}}, "captcha.png", make([]byte, 1<<20+1)))
	})
	st := h.stats()
	assert.Zero(t, st.Submissions.Accepted)
	assert.EqualValues(t, 2*len(cases)+2, st.Submissions.Rejected)
	assert.EqualValues(t, 4, st.Submissions.RejectedByCode[sim.ErrorWrongUserKey])
}

func TestTaskIDsAreUniqueAndIncreasing(t *testing.T) {
	cfg := testConfig()
	cfg.TaskIDBase = 1234500000
	h := startSim(t, cfg)
	prev := int64(0)
	for i := range 5 {
		id, err := strconv.ParseInt(h.submit("", nil), 10, 64)
		require.NoError(t, err)
		if i == 0 {
			assert.Equal(t, cfg.TaskIDBase, id)
		}
		assert.Greater(t, id, prev)
		prev = id
	}
}

func TestThreadLimitAnswersTheConfiguredBusyCode(t *testing.T) {
	for _, busy := range []string{sim.ErrorNoSlotAvailable, sim.ErrorZeroBalance} {
		t.Run(busy, func(t *testing.T) {
			cfg := testConfig()
			cfg.Threads = 2
			cfg.BusyCode = busy
			h := startSim(t, cfg)
			slow := url.Values{"sim_solve_ms": {"10000"}}
			h.submit("", slow)
			quick := h.submit("", url.Values{"sim_solve_ms": {"50"}})

			assert.Equal(t, busy, h.call("/in.php", recaptchaParams("", nil)))
			doc := decodeDoc(t, h.call("/in.php", recaptchaParams("", url.Values{"json": {"1"}})))
			assert.Equal(t, busy, doc.Request)

			// Solving the quick task frees its thread.
			h.waitResult(quick, "OK|"+sim.CodeFor(quick))
			h.submit("", slow)
			assert.EqualValues(t, 2, h.stats().Submissions.RejectedByCode[busy])
		})
	}
}

func TestResPHPAnswersNotReadyThenTheCode(t *testing.T) {
	h := startSim(t, testConfig())
	id := h.submit("", url.Values{"sim_solve_ms": {"300"}})

	assert.Equal(t, sim.CaptchaNotReady, h.result(id))
	doc := decodeDoc(t, h.call("/res.php", url.Values{"key": {testKey}, "action": {"get"}, "id": {id}, "json": {"1"}}))
	assert.Equal(t, protocolDoc{Status: 0, Request: sim.CaptchaNotReady}, doc)

	h.waitResult(id, "OK|"+sim.CodeFor(id))
	doc = decodeDoc(t, h.post("/res.php", url.Values{"key": {testKey}, "action": {"get"}, "id": {id}, "json": {"1"}}))
	assert.Equal(t, protocolDoc{Status: 1, Request: sim.CodeFor(id)}, doc)
	assert.GreaterOrEqual(t, h.task(id).ResGetCount, int64(3))
}

func TestResPHPErrorsAndAccountActions(t *testing.T) {
	cfg := testConfig()
	other := "0123456789abcdef0123456789abcdef"
	cfg.APIKeys = []string{testKey, other}
	cfg.Balance = 12.5
	h := startSim(t, cfg)
	id := h.submit("", nil)

	assert.Equal(t, sim.ErrorWrongCaptchaID, h.result("1"))
	assert.Equal(t, sim.ErrorWrongCaptchaID, h.result("not-a-number"))
	assert.Equal(t, sim.ErrorWrongCaptchaID, h.call("/res.php", url.Values{"key": {other}, "action": {"get"}, "id": {id}}),
		"a task is visible to its own key only")
	assert.Equal(t, sim.ErrorWrongUserKey, h.call("/res.php", url.Values{"key": {"x"}, "action": {"get"}, "id": {id}}))
	assert.Equal(t, sim.ErrorKeyDoesNotExist, h.call("/res.php", url.Values{"key": {unknownKey}, "action": {"get"}, "id": {id}}))

	assert.Equal(t, "12.500", h.call("/res.php", url.Values{"key": {testKey}, "action": {"getbalance"}}))
	doc := decodeDoc(t, h.call("/res.php", url.Values{"key": {testKey}, "action": {"getbalance"}, "json": {"1"}}))
	assert.Equal(t, protocolDoc{Status: 1, Request: "12.500"}, doc)

	assert.Equal(t, sim.ReportRecorded, h.call("/res.php", url.Values{"key": {testKey}, "action": {"reportgood"}, "id": {id}}))
	doc = decodeDoc(t, h.call("/res.php", url.Values{"key": {testKey}, "action": {"reportbad"}, "id": {id}, "json": {"1"}}))
	assert.Equal(t, sim.ErrorDuplicateReport, doc.Request, "a task's second report is a duplicate")
	assert.Equal(t, sim.ErrorWrongCaptchaID, h.call("/res.php", url.Values{"key": {testKey}, "action": {"reportbad"}, "id": {"42"}}))

	task := h.task(id)
	assert.EqualValues(t, 1, task.ReportsGood)
	assert.EqualValues(t, 0, task.ReportsBad)

	calls := h.stats().ResCalls
	assert.EqualValues(t, 5, calls["get"])
	assert.EqualValues(t, 2, calls["getbalance"])
	assert.EqualValues(t, 1, calls["reportgood"])
	assert.EqualValues(t, 2, calls["reportbad"])
}

func TestResultsExpireAfterTheRetentionWindow(t *testing.T) {
	cfg := testConfig()
	cfg.Retention = 150 * time.Millisecond
	h := startSim(t, cfg)
	id := h.submit("", url.Values{"sim_solve_ms": {"0"}})
	h.waitResult(id, "OK|"+sim.CodeFor(id))
	h.waitResult(id, sim.ErrorWrongCaptchaID)
	assert.Equal(t, sim.StatusExpired, h.task(id).Status)
	assert.EqualValues(t, 1, h.stats().Tasks[sim.StatusExpired])
}

func cutOK(body string) (string, bool) {
	if len(body) > 3 && body[:3] == "OK|" {
		return body[3:], true
	}
	return "", false
}
