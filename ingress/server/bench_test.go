package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/callbackauth"
)

// benchServer is the real handler stack (metrics, access log at Info, recover) with a Temporal fake that accepts
// at once, so the figures are the ingress's own cost per callback.
func benchServer(b *testing.B) *Server {
	b.Helper()
	log := slog.New(slog.NewJSONHandler(discard{}, nil))
	srv, err := New(testConfig(), &acceptAll{}, log, prometheus.NewRegistry())
	require.NoError(b, err)
	return srv
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// acceptAll is a fakeTemporal without the recording, so the benchmark does not measure a growing slice.
type acceptAll struct{ fakeTemporal }

func (*acceptAll) SignalWorkflow(_ context.Context, _, _, _ string, _ any) error { return nil }

const benchCode = "03AGdBq24PBCbwiDRaS_MJ7Zq2p9S3u4x5y6z7A8B9C0D1E2F3G4H5I6J7K8L9M0N1O2P3Q4R5S6T7U8V9W0X1Y2Z3a4b5c6d7e8f9g0h"

func runCallbackBench(b *testing.B, newReq func() *http.Request) {
	srv := benchServer(b)
	h := srv.Handler()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, newReq())
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
}

func BenchmarkCallbackTokenedGET(b *testing.B) {
	target := tokenedURL(testWorkflowID, testSecret, url.Values{"id": {"73491"}, "code": {benchCode}})
	runCallbackBench(b, func() *http.Request { return httptest.NewRequest(http.MethodGet, target, nil) })
}

func BenchmarkCallbackTokenedPOSTForm(b *testing.B) {
	target := tokenedURL(testWorkflowID, testSecret, nil)
	body := url.Values{"id": {"73491"}, "code": {benchCode}}.Encode()
	runCallbackBench(b, func() *http.Request {
		req := httptest.NewRequest(http.MethodPost, target, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return req
	})
}

func BenchmarkCallbackTokenedPOSTMultipart(b *testing.B) {
	target := tokenedURL(testWorkflowID, testSecret, nil)
	body, ct := multipartBody(b, map[string]string{"id": "73491", "code": benchCode})
	raw, err := io.ReadAll(body)
	require.NoError(b, err)
	runCallbackBench(b, func() *http.Request {
		req := httptest.NewRequest(http.MethodPost, target, bytes.NewReader(raw))
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
	token := callbackauth.Token(testSecret, testWorkflowID)
	b.ReportAllocs()
	for b.Loop() {
		if !callbackauth.Valid(token, testWorkflowID, testSecret, testPreviousSecret) {
			b.Fatal("token refused")
		}
	}
}
