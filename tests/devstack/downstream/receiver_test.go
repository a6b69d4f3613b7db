package downstream

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

func whsecSecret() string { return "whsec_" + base64.StdEncoding.EncodeToString(testKey) }

// post sends body signed the way captchaflow signs it: HMAC-SHA256 over "id.timestamp.body" with key.
func post(t *testing.T, url, id string, key []byte, ts time.Time, body []byte) *http.Response {
	t.Helper()
	signer, err := standardwebhooks.NewWebhookRaw(key)
	require.NoError(t, err)
	sig, err := signer.Sign(id, ts, body)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("content-type", "application/json")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set("webhook-signature", sig)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp
}

func resultBody(t *testing.T, taskID, code string) []byte {
	t.Helper()
	body, err := json.Marshal(Payload{TaskID: taskID, Result: captchaflow.Result{
		ProviderTaskID: "7300000001", Code: code, Via: captchaflow.ViaCallback, Submits: 1,
	}})
	require.NoError(t, err)
	return body
}

func startReceiver(t *testing.T, secret string) *Receiver {
	t.Helper()
	r, err := Start("127.0.0.1:0", secret)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func TestAcceptsValidSignatureAndCountsDuplicates(t *testing.T) {
	r := startReceiver(t, whsecSecret())
	body := resultBody(t, "task-1", "CODE-1")

	assert.Equal(t, http.StatusOK, post(t, r.URL()+"/hook", "task-1", testKey, time.Now(), body).StatusCode)
	assert.Equal(t, http.StatusOK, post(t, r.URL()+"/hook", "task-1", testKey, time.Now(), body).StatusCode,
		"a duplicate must be answered 200 so the sender stops retrying")

	assert.Equal(t, Stats{Accepted: 1, Duplicates: 1}, r.Stats())
	d, ok := r.Delivery("task-1")
	require.True(t, ok)
	assert.Equal(t, 2, d.Count)
	assert.Equal(t, "task-1", d.Payload.TaskID)
	assert.Equal(t, "CODE-1", d.Payload.Code)
	assert.Equal(t, captchaflow.ViaCallback, d.Payload.Via)
}

func TestDuplicateWithDifferentCodeIsAConflict(t *testing.T) {
	r := startReceiver(t, whsecSecret())
	post(t, r.URL(), "task-1", testKey, time.Now(), resultBody(t, "task-1", "CODE-1"))
	post(t, r.URL(), "task-1", testKey, time.Now(), resultBody(t, "task-1", "CODE-2"))
	assert.Equal(t, Stats{Accepted: 1, Duplicates: 1, Conflicts: 1}, r.Stats())
}

func TestRawSecretIsUsedAsBytes(t *testing.T) {
	r := startReceiver(t, string(testKey)) // no whsec_ prefix: the key is the secret's bytes
	assert.Equal(t, http.StatusOK, post(t, r.URL(), "task-1", testKey, time.Now(), resultBody(t, "task-1", "C")).StatusCode)
	assert.Equal(t, 1, r.Stats().Accepted)
}

func TestRejectsBadDeliveries(t *testing.T) {
	r := startReceiver(t, whsecSecret())
	body := resultBody(t, "task-1", "CODE-1")
	cases := map[string]func() *http.Response{
		"wrong key": func() *http.Response {
			return post(t, r.URL(), "task-1", []byte("another key entirely............"), time.Now(), body)
		},
		"stale timestamp": func() *http.Response {
			return post(t, r.URL(), "task-1", testKey, time.Now().Add(-time.Hour), body)
		},
		"signature of another webhook-id": func() *http.Response {
			signer, _ := standardwebhooks.NewWebhookRaw(testKey)
			ts := time.Now()
			sig, _ := signer.Sign("task-2", ts, body)
			req, _ := http.NewRequest(http.MethodPost, r.URL(), bytes.NewReader(body))
			req.Header.Set("webhook-id", "task-1")
			req.Header.Set("webhook-timestamp", strconv.FormatInt(ts.Unix(), 10))
			req.Header.Set("webhook-signature", sig)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			return resp
		},
		"missing headers": func() *http.Response {
			resp, err := http.Post(r.URL(), "application/json", bytes.NewReader(body))
			require.NoError(t, err)
			resp.Body.Close()
			return resp
		},
		"signed body that is not a result": func() *http.Response {
			return post(t, r.URL(), "task-1", testKey, time.Now(), []byte(`[1,2,3]`))
		},
	}
	for name, send := range cases {
		t.Run(name, func(t *testing.T) {
			before := r.Stats().Rejected
			assert.Equal(t, http.StatusUnauthorized, send().StatusCode)
			assert.Equal(t, before+1, r.Stats().Rejected)
			assert.Error(t, r.LastRejection())
		})
	}
	assert.Equal(t, 0, r.Stats().Accepted)
	assert.Empty(t, r.Deliveries())
}

func TestFailWithAnswersTheStatusUntilCleared(t *testing.T) {
	r := startReceiver(t, whsecSecret())
	body := resultBody(t, "task-1", "CODE-1")

	r.FailWith(http.StatusServiceUnavailable)
	assert.Equal(t, http.StatusServiceUnavailable, post(t, r.URL(), "task-1", testKey, time.Now(), body).StatusCode)
	assert.Equal(t, Stats{Refused: 1}, r.Stats())

	r.FailWith(0)
	assert.Equal(t, http.StatusOK, post(t, r.URL(), "task-1", testKey, time.Now(), body).StatusCode)
	assert.Equal(t, Stats{Accepted: 1, Refused: 1}, r.Stats())
}

func TestDownRefusesConnectionsAndUpReopensTheSamePort(t *testing.T) {
	r := startReceiver(t, whsecSecret())
	url := r.URL()
	body := resultBody(t, "task-1", "CODE-1")

	require.NoError(t, r.Down())
	_, err := http.Post(url, "application/json", bytes.NewReader(body))
	require.Error(t, err, "a downed receiver must refuse connections")
	assert.Contains(t, err.Error(), "connection refused")

	require.NoError(t, r.Up())
	assert.Equal(t, url, r.URL())
	assert.Equal(t, http.StatusOK, post(t, url, "task-1", testKey, time.Now(), body).StatusCode)
	assert.Equal(t, 1, r.Stats().Accepted)
}

func TestStartRefusesAMalformedWhsecSecret(t *testing.T) {
	_, err := Start("127.0.0.1:0", "whsec_not base64!")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "not base64!", "the secret must not appear in errors")
}

func TestDeliveriesAreInArrivalOrder(t *testing.T) {
	r := startReceiver(t, whsecSecret())
	for _, id := range []string{"b", "a", "c"} {
		post(t, r.URL(), id, testKey, time.Now(), resultBody(t, id, "CODE-"+id))
	}
	var ids []string
	for _, d := range r.Deliveries() {
		ids = append(ids, d.WebhookID)
	}
	assert.Equal(t, []string{"b", "a", "c"}, ids)
}

// captchaflow's webhook-id is "<workflow ID>.<run ID>": a delivery is found by it, or by its task ID (the latest
// run's), and a new run's result under the same task ID is a new delivery, not a duplicate.
func TestDeliveryIsFoundByTaskIDAcrossRuns(t *testing.T) {
	r := startReceiver(t, whsecSecret())
	first, second := "order-42.run-a", "order-42.run-b"
	assert.Equal(t, http.StatusOK, post(t, r.URL(), first, testKey, time.Now(), resultBody(t, "order-42", "CODE-A")).StatusCode)
	d, ok := r.Delivery("order-42")
	require.True(t, ok)
	assert.Equal(t, first, d.WebhookID)

	assert.Equal(t, http.StatusOK, post(t, r.URL(), second, testKey, time.Now(), resultBody(t, "order-42", "CODE-B")).StatusCode)
	assert.Equal(t, Stats{Accepted: 2}, r.Stats())
	d, ok = r.Delivery("order-42")
	require.True(t, ok)
	assert.Equal(t, "CODE-B", d.Payload.Code, "the latest run's result")
	d, ok = r.Delivery(first)
	require.True(t, ok)
	assert.Equal(t, "CODE-A", d.Payload.Code)
}
