// Package downstream is a customer's webhook endpoint for the local stack and the end-to-end tests: it verifies
// each delivery's Standard Webhooks signature, counts deliveries per webhook-id (a repeat is answered 200 but
// counted as a duplicate), and can be taken down or made to fail to exercise captchaflow's delivery retries.
package downstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/captchaflow/captchaflow"
)

// maxBodyBytes caps one delivery; a Result is a few hundred bytes.
const maxBodyBytes = 1 << 20

// Payload is the body captchaflow posts: the workflow's Result and the caller's task ID.
type Payload struct {
	TaskID string `json:"task_id"`
	captchaflow.Result
}

// Delivery is one accepted, signature-verified webhook-id.
type Delivery struct {
	// WebhookID is the webhook-id header ("<workflow ID>.<run ID>").
	WebhookID string
	Payload   Payload
	// FirstAt is when the first copy arrived; Count is how many verified copies arrived (1 = no duplicates).
	FirstAt time.Time
	Count   int
}

// Stats counts what the receiver saw.
type Stats struct {
	// Accepted is the number of distinct webhook-ids delivered with a valid signature.
	Accepted int
	// Duplicates are verified repeats of an already accepted webhook-id.
	Duplicates int
	// Conflicts are duplicates whose code differs from the first copy's: a correctness bug upstream.
	Conflicts int
	// Rejected failed verification (bad or missing signature, stale timestamp, unreadable body).
	Rejected int
	// Refused were answered with the configured failure status instead of being accepted.
	Refused int
}

// Receiver is the webhook endpoint. It is safe for concurrent use.
type Receiver struct {
	verifier *standardwebhooks.Webhook
	addr     string // fixed at Start so Up reopens the same port

	mu            sync.Mutex
	server        *http.Server
	listener      net.Listener
	failStatus    int
	deliveries    map[string]*Delivery
	byTask        map[string]string // task_id → webhook-id of its latest accepted delivery
	order         []string
	stats         Stats
	lastRejection error
}

// Start listens on addr (use "127.0.0.1:0" for a free port) and verifies deliveries with secret, read as
// captchaflow's NOTIFY_SECRET is: after a "whsec_" prefix the key is base64, otherwise the raw bytes.
func Start(addr, secret string) (*Receiver, error) {
	verifier, err := newVerifier(secret)
	if err != nil {
		return nil, err
	}
	r := &Receiver{verifier: verifier, deliveries: map[string]*Delivery{}, byTask: map[string]string{}}
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("downstream receiver: listen on %s: %w", addr, err)
	}
	r.addr = listener.Addr().String()
	r.serve(listener)
	return r, nil
}

func newVerifier(secret string) (*standardwebhooks.Webhook, error) {
	if secret == "" {
		return nil, errors.New("downstream receiver: a notify secret is required")
	}
	if strings.HasPrefix(secret, "whsec_") {
		verifier, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			return nil, errors.New("downstream receiver: notify secret has the whsec_ prefix but is not base64")
		}
		return verifier, nil
	}
	return standardwebhooks.NewWebhookRaw([]byte(secret))
}

func (r *Receiver) serve(listener net.Listener) {
	server := &http.Server{
		Handler:           http.HandlerFunc(r.handle),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
	}
	r.mu.Lock()
	r.server, r.listener = server, listener
	r.mu.Unlock()
	go func() { _ = server.Serve(listener) }() // returns ErrServerClosed on Down/Close
}

// URL is the endpoint's base URL; any path is accepted, so callers may add one (e.g. URL()+"/hooks/captcha").
func (r *Receiver) URL() string { return "http://" + r.addr }

// Down closes the listener and open connections: deliveries now get "connection refused".
func (r *Receiver) Down() error {
	r.mu.Lock()
	server, listener := r.server, r.listener
	r.server, r.listener = nil, nil
	r.mu.Unlock()
	if server == nil {
		return nil
	}
	// Close the listener ourselves too: Serve may not have registered it with the server yet, and then
	// server.Close would leave it accepting.
	_ = listener.Close()
	// server.Close closes the same listener again when Serve had registered it; that second close is expected.
	if err := server.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// Up reopens the listener on the same address after Down.
func (r *Receiver) Up() error {
	r.mu.Lock()
	up := r.server != nil
	r.mu.Unlock()
	if up {
		return nil
	}
	listener, err := net.Listen("tcp", r.addr)
	if err != nil {
		return fmt.Errorf("downstream receiver: reopen %s: %w", r.addr, err)
	}
	r.serve(listener)
	return nil
}

// Close stops the receiver for good.
func (r *Receiver) Close() error { return r.Down() }

// FailWith makes every delivery answer status (e.g. 503) without being accepted; 0 restores normal service.
func (r *Receiver) FailWith(status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failStatus = status
}

func (r *Receiver) handle(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	if status := r.refusal(); status != 0 {
		http.Error(w, "downstream is failing on purpose", status)
		return
	}

	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxBodyBytes))
	if err == nil {
		err = r.verifier.Verify(body, req.Header)
	}
	var payload Payload
	if err == nil {
		if jsonErr := json.Unmarshal(body, &payload); jsonErr != nil {
			err = fmt.Errorf("body is not a captchaflow result: %w", jsonErr)
		}
	}
	if err != nil {
		r.reject(err)
		http.Error(w, "rejected", http.StatusUnauthorized)
		return
	}
	r.accept(req.Header.Get(standardwebhooks.HeaderWebhookID), payload)
	w.WriteHeader(http.StatusOK)
}

// refusal returns the status to fail with (counting the refusal), or 0 to go on.
func (r *Receiver) refusal() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failStatus != 0 {
		r.stats.Refused++
	}
	return r.failStatus
}

func (r *Receiver) reject(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.Rejected++
	r.lastRejection = err
}

func (r *Receiver) accept(id string, payload Payload) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d, ok := r.deliveries[id]; ok {
		d.Count++
		r.stats.Duplicates++
		if payload.Code != d.Payload.Code {
			r.stats.Conflicts++
		}
		return
	}
	r.deliveries[id] = &Delivery{WebhookID: id, Payload: payload, FirstAt: time.Now(), Count: 1}
	r.byTask[payload.TaskID] = id
	r.order = append(r.order, id)
	r.stats.Accepted++
}

// Stats returns the counters so far.
func (r *Receiver) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// LastRejection is why the most recent delivery was rejected (nil if none was), to make test failures legible.
func (r *Receiver) LastRejection() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastRejection
}

// Delivery returns the accepted delivery for a webhook-id or, failing that, the latest one for a task ID (the
// workflow ID: captchaflow's webhook-id is "<workflow ID>.<run ID>", one per result).
func (r *Receiver) Delivery(id string) (Delivery, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.deliveries[id]
	if !ok {
		d, ok = r.deliveries[r.byTask[id]]
	}
	if !ok {
		return Delivery{}, false
	}
	return *d, true
}

// Deliveries returns every accepted delivery in arrival order.
func (r *Receiver) Deliveries() []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Delivery, 0, len(r.order))
	for _, id := range r.order {
		out = append(out, *r.deliveries[id])
	}
	return out
}
