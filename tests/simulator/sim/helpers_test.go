package sim_test

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

const (
	testKey     = sim.DefaultAPIKey
	waitFor     = 3 * time.Second
	pollEvery   = 5 * time.Millisecond
	unknownKey  = "ffffffffffffffffffffffffffffffff"
	recaptchaSK = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
)

// testConfig is the default config with accelerated, test-sized timings.
func testConfig() sim.Config {
	cfg := sim.DefaultConfig()
	cfg.SolveMin = 20 * time.Millisecond
	cfg.SolveMax = 60 * time.Millisecond
	cfg.Retention = 10 * time.Second
	cfg.PingbackTimeout = time.Second
	cfg.LateDelay = 300 * time.Millisecond
	cfg.HangFor = 2 * time.Second
	cfg.CloseTimeout = 2 * time.Second
	return cfg
}

type harness struct {
	t   *testing.T
	sim *sim.Simulator
	srv *httptest.Server
}

func startSim(t *testing.T, cfg sim.Config) *harness {
	t.Helper()
	s, err := sim.New(cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		srv.Close()
		s.Close()
	})
	return &harness{t: t, sim: s, srv: srv}
}

// call sends a GET to path with params and returns the body.
func (h *harness) call(path string, params url.Values) string {
	h.t.Helper()
	resp, err := http.Get(h.srv.URL + path + "?" + params.Encode())
	require.NoError(h.t, err)
	return readOK(h.t, resp)
}

// post sends an urlencoded POST.
func (h *harness) post(path string, params url.Values) string {
	h.t.Helper()
	resp, err := http.PostForm(h.srv.URL+path, params)
	require.NoError(h.t, err)
	return readOK(h.t, resp)
}

// postFile sends a multipart POST with a file part named "file".
func (h *harness) postFile(params url.Values, filename string, content []byte) string {
	h.t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, vs := range params {
		for _, v := range vs {
			require.NoError(h.t, mw.WriteField(k, v))
		}
	}
	if filename != "" {
		fw, err := mw.CreateFormFile("file", filename)
		require.NoError(h.t, err)
		_, err = fw.Write(content)
		require.NoError(h.t, err)
	}
	require.NoError(h.t, mw.Close())
	resp, err := http.Post(h.srv.URL+"/in.php", mw.FormDataContentType(), &buf)
	require.NoError(h.t, err)
	return readOK(h.t, resp)
}

func readOK(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "protocol errors still answer HTTP 200; body %q", body)
	return string(body)
}

// submit submits a reCAPTCHA task (plain text) and returns its id.
func (h *harness) submit(pingback string, extra url.Values) string {
	h.t.Helper()
	body := h.call("/in.php", recaptchaParams(pingback, extra))
	id, ok := strings.CutPrefix(body, "OK|")
	require.True(h.t, ok, "submission rejected: %q", body)
	return id
}

func recaptchaParams(pingback string, extra url.Values) url.Values {
	p := url.Values{
		"key": {testKey}, "method": {"userrecaptcha"},
		"googlekey": {recaptchaSK}, "pageurl": {"https://example.com/login"},
	}
	if pingback != "" {
		p.Set("pingback", pingback)
	}
	for k, v := range extra {
		p[k] = v
	}
	return p
}

func (h *harness) result(id string) string {
	h.t.Helper()
	return h.call("/res.php", url.Values{"key": {testKey}, "action": {"get"}, "id": {id}})
}

func (h *harness) waitResult(id, want string) {
	h.t.Helper()
	require.Eventually(h.t, func() bool { return h.result(id) == want }, waitFor, pollEvery,
		"res.php never answered %q for task %s", want, id)
}

func (h *harness) stats() sim.Stats {
	h.t.Helper()
	var st sim.Stats
	h.getJSON("/_sim/stats", &st)
	return st
}

func (h *harness) task(id string) sim.Task {
	h.t.Helper()
	var list sim.TaskList
	h.getJSON("/_sim/tasks", &list)
	for _, task := range list.Tasks {
		if task.ID == id {
			return task
		}
	}
	h.t.Fatalf("task %s not listed", id)
	return sim.Task{}
}

func (h *harness) getJSON(path string, v any) {
	h.t.Helper()
	resp, err := http.Get(h.srv.URL + path)
	require.NoError(h.t, err)
	require.NoError(h.t, json.Unmarshal([]byte(readOK(h.t, resp)), v))
}

// receiver records pingbacks like the ingress would.
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []url.Values
	paths  []string
	status int
}

func startReceiver(t *testing.T, status int) *receiver {
	t.Helper()
	rc := &receiver{status: status}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.handle))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) handle(w http.ResponseWriter, r *http.Request) {
	rc.mu.Lock()
	rc.got = append(rc.got, r.URL.Query())
	rc.paths = append(rc.paths, r.URL.Path)
	rc.mu.Unlock()
	w.WriteHeader(rc.status)
}

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.got)
}

func (rc *receiver) received() []url.Values {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]url.Values(nil), rc.got...)
}

func (rc *receiver) url(workflowID string) string {
	return rc.srv.URL + "/callback/" + workflowID + "?t=secret-token-" + workflowID
}
