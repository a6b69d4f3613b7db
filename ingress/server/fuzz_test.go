package server

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/callbackauth"
)

// Fuzz targets for callback parsing. Whatever arrives, the ingress must not panic (a recovered panic is a 500)
// and must answer with one of the statuses of its contract, a JSON body, and never signal a code over
// captchaflow.MaxCodeBytes or an empty one. Seeds are in testdata/fuzz/<target>/; run one with
//
//	go test ./ingress/server/ -run '^$' -fuzz '^FuzzCallbackQuery$' -fuzztime 60s

// contractStatuses are the answers a callback route may give.
var contractStatuses = map[int]bool{
	http.StatusOK: true, http.StatusBadRequest: true, http.StatusForbidden: true,
	http.StatusRequestEntityTooLarge: true, http.StatusTooManyRequests: true, http.StatusServiceUnavailable: true,
}

// fuzzTemporal accepts every signal without keeping it (a fuzz run sends millions) and remembers only whether an
// out-of-contract code reached it. Provider IDs ending in an even digit have a running workflow.
type fuzzTemporal struct {
	client.Client // the ingress calls only the methods below
	badCode       atomic.Bool
}

func (f *fuzzTemporal) SignalWorkflow(_ context.Context, _, _, _ string, arg any) error {
	if cb, ok := arg.(captchaflow.Callback); !ok || cb.Code == "" || len(cb.Code) > captchaflow.MaxCodeBytes {
		f.badCode.Store(true)
	}
	return nil
}

func (f *fuzzTemporal) UpdateWorkflow(_ context.Context, o client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error) {
	if hint, ok := o.Args[0].(captchaflow.UntokenedHint); !ok || hint.ProviderTaskID == "" {
		f.badCode.Store(true)
	}
	return fakeUpdateHandle{}, nil
}

func (f *fuzzTemporal) ListWorkflow(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	// The query is CaptchaTaskId = '<id>' AND …, the ID validated non-empty.
	if parts := strings.Split(req.GetQuery(), "'"); len(parts) > 1 && parts[1] != "" &&
		strings.IndexByte("02468", parts[1][len(parts[1])-1]) >= 0 {
		return found("wf"), nil
	}
	return &workflowservice.ListWorkflowExecutionsResponse{}, nil
}

func (f *fuzzTemporal) CheckHealth(context.Context, *client.CheckHealthRequest) (*client.CheckHealthResponse, error) {
	return &client.CheckHealthResponse{}, nil
}

// newFuzzServer is one server for a whole fuzz run, its limits generous enough that most inputs reach the parser.
func newFuzzServer(f *testing.F) (*Server, *fuzzTemporal) {
	cfg := testConfig()
	cfg.LookupTimeout = 20 * time.Millisecond
	cfg.UntokenedQueue = 1024
	cfg.UntokenedRate, cfg.UntokenedRatePerIP = 1e6, 1e6
	cfg.CallbackBurst = 1 << 20
	fake := &fuzzTemporal{}
	srv, err := New(cfg, fake, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	if err != nil {
		f.Fatal(err)
	}
	srv.lookupDelay = 0
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Close(ctx)
	})
	return srv, fake
}

// fuzzRequest builds a callback request from raw parts, bypassing URL parsing so any bytes reach the server.
func fuzzRequest(method, path, rawPath, rawQuery, contentType string, body []byte, chunked bool) *http.Request {
	req := httptest.NewRequest(method, "/", bytes.NewReader(body))
	req.URL.Path, req.URL.RawPath, req.URL.RawQuery = path, rawPath, rawQuery
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if chunked {
		req.ContentLength = -1
	}
	return req
}

// checkAnswer fails the run on an answer outside the contract.
func checkAnswer(t *testing.T, rec *httptest.ResponseRecorder, fake *fuzzTemporal) {
	t.Helper()
	if !contractStatuses[rec.Code] {
		t.Fatalf("status %d is not in the contract: %s", rec.Code, rec.Body.String())
	}
	var body map[string]string
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("status %d with a body that is not JSON: %q", rec.Code, rec.Body.String())
	}
	if rec.Code == http.StatusOK && body["status"] != "ok" || rec.Code != http.StatusOK && body["error"] == "" {
		t.Fatalf("status %d with body %q", rec.Code, rec.Body.String())
	}
	if fake.badCode.Load() {
		t.Fatal("a signal carried an empty code or one over captchaflow.MaxCodeBytes")
	}
}

// callbackPath is the path a fuzz input targets: the tokened route for a workflow ID, percent-encoded as a
// client sends it (the token valid when validToken, so the input reaches the parser), or the untokened route.
func callbackPath(tokened, validToken bool, workflowID, rawQuery string) (path, rawPath, query string) {
	if !tokened {
		return strings.TrimSuffix(callbackauth.CallbackPath, "/"), "", rawQuery
	}
	if validToken {
		rawQuery = strings.SplitN(tokenedURL(workflowID, testSecret, nil), "?", 2)[1] + "&" + rawQuery
	}
	return callbackauth.CallbackPath + workflowID, callbackauth.CallbackPath + url.PathEscape(workflowID), rawQuery
}

// FuzzCallbackQuery: a GET with id and code (or anything else) in the query string.
func FuzzCallbackQuery(f *testing.F) {
	f.Add(true, true, testWorkflowID, "id=73491&code=03AGdBq24PBCbwiDRaS")
	f.Add(false, false, "", "id=73492&code=abc")
	f.Add(true, false, testWorkflowID, "t=zz&id=1&code=x")
	f.Add(true, true, "task%3A7", "id=%zz&code=x")
	srv, fake := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, tokened, validToken bool, workflowID, rawQuery string) {
		path, rawPath, query := callbackPath(tokened, validToken, workflowID, rawQuery)
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, fuzzRequest(http.MethodGet, path, rawPath, query, "", nil, false))
		checkAnswer(t, rec, fake)
	})
}

// FuzzCallbackBody: a POST whose id and code come in an urlencoded or multipart body (or a body of any other
// type, or garbage), with or without a Content-Length, and possibly a query string too.
func FuzzCallbackBody(f *testing.F) {
	f.Add(true, testWorkflowID, "", "application/x-www-form-urlencoded", []byte("id=73491&code=abc"), false)
	f.Add(false, "", "", "application/x-www-form-urlencoded", []byte("id=73492&code=abc"), true)
	f.Add(true, testWorkflowID, "", "multipart/form-data; boundary=X",
		[]byte("--X\r\nContent-Disposition: form-data; name=\"id\"\r\n\r\n9\r\n--X\r\nContent-Disposition: form-data; name=\"code\"\r\n\r\nc\r\n--X--\r\n"), true)
	f.Add(true, testWorkflowID, "id=1&code=q", "multipart/form-data; boundary=nope", []byte("--nope\r\ngarbage"), false)
	f.Add(false, "", "", "application/json", []byte(`{"id":"9","code":"x"}`), false)
	srv, fake := newFuzzServer(f)
	f.Fuzz(func(t *testing.T, tokened bool, workflowID, rawQuery, contentType string, body []byte, chunked bool) {
		path, rawPath, query := callbackPath(tokened, true, workflowID, rawQuery)
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, fuzzRequest(http.MethodPost, path, rawPath, query, contentType, body, chunked))
		checkAnswer(t, rec, fake)
	})
}
