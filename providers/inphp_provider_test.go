package providers

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testKey is shaped like a real 32-character key so redaction tests are honest.
const testKey = "5ecre7k3y5ecre7k3y5ecre7k3y0000a"

// reply is what the fake provider answers.
type reply struct {
	status int // 0 means 200
	body   string
}

// fakeProvider is an httptest server on 127.0.0.1 speaking in.php / res.php.
// Each test decides the replies; the server records what it was sent.
type fakeProvider struct {
	srv *httptest.Server

	mu       sync.Mutex
	answer   func(r *http.Request) reply
	requests []*http.Request // parsed (forms already read)
}

func newFakeProvider(t *testing.T, answer func(r *http.Request) reply) *fakeProvider {
	t.Helper()
	p := &fakeProvider{answer: answer}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *fakeProvider) serve(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/in.php", "/res.php":
	default:
		http.NotFound(w, r)
		return
	}
	if r.Method == http.MethodPost {
		if err := r.ParseMultipartForm(8 << 20); err != nil && err != http.ErrNotMultipart {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
	}
	_ = r.ParseForm()
	p.mu.Lock()
	p.requests = append(p.requests, r)
	answer := p.answer
	p.mu.Unlock()

	rep := answer(r)
	if rep.status == 0 {
		rep.status = http.StatusOK
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(rep.status)
	_, _ = io.WriteString(w, rep.body)
}

func (p *fakeProvider) lastRequest(t *testing.T) *http.Request {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	require.NotEmpty(t, p.requests, "provider received no request")
	return p.requests[len(p.requests)-1]
}

func (p *fakeProvider) requestCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.requests)
}

// client returns a Client for this provider with short timeouts.
func (p *fakeProvider) client(t *testing.T, opts ...Option) *InPHP {
	t.Helper()
	c, err := NewInPHP(p.srv.URL, testKey, append([]Option{WithTimeout(5 * time.Second), WithResultBatching(50 * time.Millisecond)}, opts...)...)
	require.NoError(t, err)
	return c
}

// always answers every request with the same reply.
func always(status int, body string) func(*http.Request) reply {
	return func(*http.Request) reply { return reply{status: status, body: body} }
}

// closedAddr returns a 127.0.0.1 address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// hangingProvider accepts requests and never answers until the test ends.
func hangingProvider(t *testing.T) *httptest.Server {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first: unblock handlers so Close can return
	return srv
}
