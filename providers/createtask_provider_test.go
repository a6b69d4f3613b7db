package providers

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// testKey is shaped like a real key so redaction tests are honest.

// request is one call the fake provider received.
type request struct {
	path string
	body map[string]json.RawMessage
}

// ctReply is what the fake provider answers (status 0 is 200).
type ctReply struct {
	status int
	body   string
}

// ctFake is an httptest server on loopback speaking createTask; each test decides the replies.
type ctFake struct {
	srv    *httptest.Server
	mu     sync.Mutex
	answer func(path string) ctReply
	reqs   []request
}

func newFake(t *testing.T, answer func(path string) ctReply) *ctFake {
	t.Helper()
	p := &ctFake{answer: answer}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]json.RawMessage
		_ = json.Unmarshal(raw, &body)
		p.mu.Lock()
		p.reqs = append(p.reqs, request{path: r.URL.Path, body: body})
		rp := p.answer(r.URL.Path)
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if rp.status != 0 {
			w.WriteHeader(rp.status)
		}
		_, _ = io.WriteString(w, rp.body)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// ctAlways answers every request the same.
func ctAlways(status int, body string) func(string) ctReply {
	return func(string) ctReply { return ctReply{status, body} }
}

func (p *ctFake) client(t *testing.T, f Flavor, opts ...Option) *CreateTask {
	t.Helper()
	c, err := NewCreateTask(f, p.srv.URL, testKey, opts...)
	require.NoError(t, err)
	return c
}

func (p *ctFake) requests() []request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]request(nil), p.reqs...)
}

func (p *ctFake) last(t *testing.T) request {
	t.Helper()
	reqs := p.requests()
	require.NotEmpty(t, reqs)
	return reqs[len(reqs)-1]
}
