package server

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/callbackauth"
)

// benchServer is the real handler stack (metrics, access log at Info, recover) with a Temporal fake that accepts
// at once, so the figures are the ingress's own cost per callback. The signal budget is unlimited and each
// iteration sends another code (benchCodeN), so every iteration takes the signalling path, not the cheaper
// duplicate or suppressed one.
func benchServer(b *testing.B) *Server {
	b.Helper()
	log := slog.New(slog.NewJSONHandler(discard{}, nil))
	cfg := testConfig()
	cfg.CallbackBurst = 1 << 30
	srv, err := New(cfg, &acceptAll{}, log, prometheus.NewRegistry())
	require.NoError(b, err)
	b.Cleanup(func() { _ = srv.Close(context.Background()) })
	return srv
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// acceptAll is a fakeTemporal without the recording, so the benchmark does not measure a growing slice.
type acceptAll struct{ fakeTemporal }

func (*acceptAll) SignalWorkflow(_ context.Context, _, _, _ string, _ any) error { return nil }

const benchCode = "03AGdBq24PBCbwiDRaS_MJ7Zq2p9S3u4x5y6z7A8B9C0D1E2F3G4H5I6J7K8L9M0N1O2P3Q4R5S6T7U8V9W0X1Y2Z3a4b5c6d7e8f9g0h"

// runCallbackBench sends newReq(i) for iteration i and wants 200.
func runCallbackBench(b *testing.B, newReq func(i int) *http.Request) {
	srv := benchServer(b)
	h := srv.Handler()
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		i++
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, newReq(i))
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
}

// benchCodeN is benchCode made distinct per iteration, so no iteration is an exact repeat.
func benchCodeN(i int) string { return benchCode + strconv.Itoa(i) }

func BenchmarkCallbackTokenedGET(b *testing.B) {
	target := tokenedURL(testWorkflowID, testSecret, url.Values{"id": {"73491"}}) + "&code="
	runCallbackBench(b, func(i int) *http.Request {
		return httptest.NewRequest(http.MethodGet, target+benchCodeN(i), nil)
	})
}

func BenchmarkCallbackTokenedPOSTForm(b *testing.B) {
	target := tokenedURL(testWorkflowID, testSecret, nil)
	runCallbackBench(b, func(i int) *http.Request {
		req := httptest.NewRequest(http.MethodPost, target, strings.NewReader("id=73491&code="+benchCodeN(i)))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return req
	})
}

func BenchmarkCallbackTokenedPOSTMultipart(b *testing.B) {
	target := tokenedURL(testWorkflowID, testSecret, nil)
	body, ct := multipartBody(b, map[string]string{"id": "73491", "code": "CODE"})
	raw, err := io.ReadAll(body)
	require.NoError(b, err)
	before, after, ok := strings.Cut(string(raw), "CODE")
	require.True(b, ok)
	runCallbackBench(b, func(i int) *http.Request {
		req := httptest.NewRequest(http.MethodPost, target, strings.NewReader(before+benchCodeN(i)+after))
		req.Header.Set("Content-Type", ct)
		return req
	})
}

func BenchmarkCallbackForged(b *testing.B) {
	srv := benchServer(b)
	h := srv.Handler()
	target := tokenedURL(testWorkflowID, "attacker-guess", url.Values{"id": {"73491"}, "code": {benchCode}})
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
		if rec.Code != http.StatusForbidden {
			b.Fatalf("status %d", rec.Code)
		}
	}
}

func BenchmarkTokenCheck(b *testing.B) {
	sub := callbackauth.Submission{RunID: testRunID, N: 1}
	token := callbackauth.TokenFor(testSecret, testWorkflowID, sub)
	b.ReportAllocs()
	for b.Loop() {
		if !callbackauth.ValidFor(token, testWorkflowID, sub, testSecret, testPreviousSecret) {
			b.Fatal("token refused")
		}
	}
}
