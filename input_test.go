package captchaflow

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/callbackauth"
)

func decode(t *testing.T, js string) Input {
	t.Helper()
	var in Input
	require.NoError(t, json.Unmarshal([]byte(js), &in), "decoding never fails; Validate reports")
	return in.WithDefaults()
}

func TestInputDefaultsAndPlainObjectDecoding(t *testing.T) {
	in := decode(t, `{"method":"userrecaptcha","params":{"googlekey":"k","pageurl":"https://e.com","invisible":1,"enterprise":true,"min_score":0.3}}`)
	require.NoError(t, in.Validate())
	assert.Equal(t, "1", in.Params["invisible"])
	assert.Equal(t, "true", in.Params["enterprise"])
	assert.Equal(t, "0.3", in.Params["min_score"])
	assert.Equal(t, 120, in.CallbackTimeoutSeconds)
	assert.Equal(t, 5, in.PollIntervalSeconds)
	assert.Equal(t, 600, in.DeadlineSeconds)
	assert.Equal(t, 2, in.MaxSubmits)
	assert.Equal(t, 86400, in.DeliveryTimeoutSeconds)
}

func TestInputErrorsNameTheField(t *testing.T) {
	cases := map[string]string{
		`{"params":{"a":"b"}}`:                                                        "method: required",
		`{"method":"Bad Method!","params":{"a":"b"}}`:                                 "method:",
		`{"method":"userrecaptcha"}`:                                                  "params: required",
		`{"method":"userrecaptcha","params":{"pageurl":"https://e.com"}}`:             "params.googlekey: required",
		`{"method":"userrecaptcha","params":{"googlekey":"k","pageurl":"not a url"}}`: "params.pageurl:",
		`{"method":"hcaptcha","params":{"pageurl":"https://e.com"}}`:                  "params.sitekey",
		`{"method":"base64","params":{}}`:                                             "params.body",
		`{"method":"custom","params":{"key":"sneaky"}}`:                               "params.key: set by captchaflow",
		`{"method":"custom","params":{"pingback":"http://evil"}}`:                     "params.pingback",
		`{"method":"custom","params":{"a":{"nested":1}}}`:                             "params.a: must be a string, number or boolean",
		`{"method":"custom","params":["a"]}`:                                          "params",
		`{"method":"custom","params":{"a":"b"},"callback_timeout_seconds":"120"}`:     "callback_timeout_seconds: must be an integer",
		`{"method":"custom","params":{"a":"b"},"callback_timeout_seconds":-1}`:        "callback_timeout_seconds: -1 is out of range",
		`{"method":"custom","params":{"a":"b"},"poll_interval_seconds":999999}`:       "poll_interval_seconds",
		`{"method":"custom","params":{"a":"b"},"max_submits":11}`:                     "max_submits",
		`{"method":"custom","params":{"a":"b"},"deadline_seconds":1e12}`:              "deadline_seconds",
		`{"method":"custom","params":{"a":"b"},"notify_url":"ftp://x"}`:               "notify_url:",
		`{"method":"custom","params":{"a":"b"},"delivery_timeout_seconds":99999999}`:  "delivery_timeout_seconds",
		`"just a string"`: "not a JSON object",
	}
	for js, want := range cases {
		err := decode(t, js).Validate()
		if assert.Error(t, err, js) {
			assert.Contains(t, err.Error(), want, js)
		}
	}
}

func TestValidateWorkflowID(t *testing.T) {
	for _, ok := range []string{"a", "task-1", "order:42.v2_x", strings.Repeat("x", 200)} {
		assert.NoError(t, ValidateWorkflowID(ok), ok)
	}
	for _, bad := range []string{"", "has space", "slash/x", "q?x", strings.Repeat("x", 201), "é"} {
		assert.Error(t, ValidateWorkflowID(bad), bad)
	}
}

// The workflow ID is a segment of the pingback URL: an ID the validation takes reaches the ingress as it is, even
// through a client that resolves dot segments (RFC 3986 5.2.4, as libcurl and browsers do): "." and ".." would not.
func TestAValidWorkflowIDSurvivesDotSegmentRemoval(t *testing.T) {
	for _, id := range []string{".", "..", "...", ".a", "a..", "-", "order:42.v2_x"} {
		pingback, err := callbackauth.URLFor("https://cb.example/base", id, "secret", callbackauth.Submission{RunID: "r", N: 1})
		require.NoError(t, err)
		u, err := url.Parse(pingback)
		require.NoError(t, err)
		requested := new(url.URL).ResolveReference(u).EscapedPath() // what a normalising client asks for
		if err := ValidateWorkflowID(id); err == nil {
			assert.Equal(t, "/base"+callbackauth.CallbackPath+id, requested, "ID %q is taken, but its callback goes elsewhere", id)
		} else {
			assert.ErrorContains(t, err, "workflow ID", id)
		}
	}
}

// TestInputErrorNamesTheSmallestBadParamEveryTime: the input is decoded again on every replay, so of several bad
// params the InvalidInput message must always name the same one (the smallest key), never the map's random first.
func TestInputErrorNamesTheSmallestBadParamEveryTime(t *testing.T) {
	js := `{"method":"custom","params":{"zeta":{"a":1},"mu":[1],"beta":null,"alpha":"ok","gamma":{"x":2},` +
		`"delta":[],"epsilon":{},"eta":[2],"theta":null,"iota":{"y":3}}}`
	for range 200 {
		err := decode(t, js).Validate()
		require.Error(t, err)
		require.Equal(t, "params.beta: must be a string, number or boolean", err.Error())
	}
}

// A history from before the kinds added with proxies replays as that build judged it: their required fields are
// Validate's last check, the one checkInput gates (a method it did not know passed through with any params).
func TestKindParamsAreJudgedLastAsProxiesAre(t *testing.T) {
	in := Input{Method: "amazon_waf", Params: Params{"sitekey": "k", "iv": "i", "pageurl": "https://e.com/"}}.WithDefaults()
	assert.ErrorContains(t, in.Validate(), "params.context")
	assert.NoError(t, in.ValidBeforeProxies(), "a build before the kinds took it")
	in.MaxSubmits = 99
	assert.ErrorContains(t, in.ValidBeforeProxies(), "max_submits", "what it refused it still refuses")
	assert.ErrorContains(t, in.Validate(), "max_submits", "first")
}
