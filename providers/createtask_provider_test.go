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
const testKey = "5ecre7k3y5ecre7k3y5ecre7k3y0000a"

// request is one call the fake provider received.
type request struct {
	path string
	body map[string]json.RawMessage
}

// reply is what the fake provider answers (status 0 is 200).
type reply struct {
	status int
	body   string
}

// fakeProvider is an httptest server on loopback speaking createTask; each test decides the replies.
type fakeProvider struct {
	srv    *httptest.Server
	mu     sync.Mutex
	answer func(path string) reply
	reqs   []request
}

func newFake(t *testing.T, answer func(path string) reply) *fakeProvider {
	t.Helper()
	p := &fakeProvider{answer: answer}
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

// always answers every request the same.
func always(status int, body string) func(string) reply {
	return func(string) reply { return reply{status, body} }
}

func (p *fakeProvider) client(t *testing.T, f Flavor, opts ...Option) *Client {
	t.Helper()
	c, err := New(f, p.srv.URL, testKey, opts...)
	require.NoError(t, err)
	return c
}

func (p *fakeProvider) requests() []request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]request(nil), p.reqs...)
}

func (p *fakeProvider) last(t *testing.T) request {
	t.Helper()
	reqs := p.requests()
	require.NotEmpty(t, reqs)
	return reqs[len(reqs)-1]
}
