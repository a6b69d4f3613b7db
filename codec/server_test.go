package codec

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

const ui = "http://localhost:8233"

// request is a call to h; header holds name, value pairs.
func request(t *testing.T, h http.Handler, method, path, body string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, "http://127.0.0.1:8234"+path, strings.NewReader(body))
	for i := 0; i < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// encrypted is a /decode request body holding "the-code" encrypted by c.
func encrypted(t *testing.T, c *Codec) string {
	p, err := DataConverter(c).ToPayload("the-code")
	require.NoError(t, err)
	js, err := protojson.Marshal(&commonpb.Payloads{Payloads: []*commonpb.Payload{p}})
	require.NoError(t, err)
	return string(js)
}

func TestServerDecodesForItsTokenOnly(t *testing.T) {
	c := writeKeys(t, NewKeyLine("k1"))
	h := Handler(c, ServerOptions{Namespace: "default", Origins: []string{ui}, Token: "tok"})
	body := encrypted(t, c)
	assert.Equal(t, http.StatusUnauthorized, request(t, h, "POST", "/decode", body).Code)
	assert.Equal(t, http.StatusUnauthorized, request(t, h, "POST", "/decode", body, "Authorization", "Bearer nope").Code)
	w := request(t, h, "POST", "/decode", body, "Authorization", "Bearer tok", "X-Namespace", "default")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Contains(t, w.Body.String(), "InRoZS1jb2RlIg==", "base64 of the JSON \"the-code\"")
	w = request(t, h, "POST", "/decode", body, "Authorization", "Bearer tok", "X-Namespace", "other")
	assert.Equal(t, http.StatusForbidden, w.Code)
	w = request(t, h, "POST", "/encode", `{"payloads":[{"metadata":{"encoding":"anNvbi9wbGFpbg=="},"data":"IngiCg=="}]}`,
		"Authorization", "Bearer tok")
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Contains(t, w.Body.String(), "YmluYXJ5L2VuY3J5cHRlZA==", "binary/encrypted")
}

func TestServerCORSOnlyForTheWebUI(t *testing.T) {
	h := Handler(writeKeys(t, NewKeyLine("k1")), ServerOptions{Namespace: "default", Origins: []string{ui}, Token: "tok"})
	w := request(t, h, "OPTIONS", "/decode", "", "Origin", ui, "Access-Control-Request-Method", "POST")
	assert.Equal(t, http.StatusNoContent, w.Code)
	assert.Equal(t, ui, w.Header().Get("Access-Control-Allow-Origin"))
	assert.Contains(t, w.Header().Get("Access-Control-Allow-Headers"), "X-Namespace")
	for _, method := range []string{"OPTIONS", "POST"} {
		w = request(t, h, method, "/decode", "{}", "Origin", "https://evil.example", "Authorization", "Bearer tok")
		assert.Equal(t, http.StatusForbidden, w.Code, method)
		assert.Empty(t, w.Header().Get("Access-Control-Allow-Origin"), method)
	}
}

func TestServerLoopbackExceptionIsLoopbackOnly(t *testing.T) {
	c := writeKeys(t, NewKeyLine("k1"))
	o := ServerOptions{Namespace: "default", Origins: []string{ui}, LoopbackWithoutToken: true}
	h, body := Handler(c, o), encrypted(t, c)
	r := httptest.NewRequest("POST", "http://127.0.0.1:8234/decode", strings.NewReader(body))
	r.RemoteAddr = "127.0.0.1:5000"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	assert.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, http.StatusUnauthorized, request(t, h, "POST", "/decode", body).Code, "httptest's peer is 192.0.2.1")
	r = httptest.NewRequest("POST", "http://rebound.example:8234/decode", strings.NewReader(body))
	r.RemoteAddr = "127.0.0.1:5000"
	w = httptest.NewRecorder()
	h.ServeHTTP(w, r)
	assert.Equal(t, http.StatusUnauthorized, w.Code, "a rebound DNS name is not loopback")

	require.NoError(t, o.Check("127.0.0.1:8234"))
	require.Error(t, o.Check("0.0.0.0:8234"))
	require.Error(t, o.Check("localhost:8234"), "a name may resolve elsewhere")
	require.Error(t, ServerOptions{}.Check("127.0.0.1:8234"), "neither token nor exception")
	require.NoError(t, ServerOptions{Token: "tok"}.Check(":8234"))
}
