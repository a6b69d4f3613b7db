package codec

import (
	"crypto/subtle"
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"

	"go.temporal.io/sdk/converter"
)

// ServerOptions configure the codec server (Temporal's remote codec protocol: POST /encode and /decode).
type ServerOptions struct {
	Namespace            string   // the one namespace whose payloads it serves (the X-Namespace header, when sent)
	Origins              []string // the Web UI's, matched exactly (CORS); other browser pages are refused
	Token                string   // the bearer token every request carries (the CLI's --codec-auth "Bearer …")
	LoopbackWithoutToken bool     // make run's exception: no sign-in, no token, but only loopback peers and Host names
}

// maxBody bounds a request: a page of the Web UI's payloads, far above Temporal's 2 MiB payload limit.
const maxBody = 16 << 20

// Check refuses a server that would answer anyone: a token is required unless addr is a loopback IP literal.
func (o ServerOptions) Check(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if o.Token == "" && (!o.LoopbackWithoutToken || !isLoopback(host)) {
		return errors.New("the codec server needs CODEC_TOKEN_FILE (a bearer token), or CODEC_LOOPBACK_WITHOUT_TOKEN " +
			"with a loopback CODEC_ADDR such as 127.0.0.1:8234")
	}
	return nil
}

// Handler serves c's encode and decode to the allowed origins and credentials only.
func Handler(c *Codec, o ServerOptions) http.Handler {
	codec := converter.NewPayloadCodecHTTPHandler(c)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !o.cors(w, r) {
			http.Error(w, "origin not allowed", http.StatusForbidden)
			return
		}
		if r.Method == http.MethodOptions {
			w.WriteHeader(http.StatusNoContent) // a preflight carries no credential
			return
		}
		if !o.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="captchaflow codec"`)
			http.Error(w, "a bearer token is required", http.StatusUnauthorized)
			return
		}
		if ns := r.Header.Get("X-Namespace"); ns != "" && ns != o.Namespace {
			http.Error(w, "this codec server serves another namespace", http.StatusForbidden)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		codec.ServeHTTP(w, r)
	})
}

// cors answers the Web UI's origins and tells whether the request may go on (no Origin: not a browser's).
func (o ServerOptions) cors(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	if !slices.Contains(o.Origins, origin) {
		return false
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Allow-Credentials", "true") // the UI's includeCredentials
	h.Set("Access-Control-Allow-Methods", "POST")
	h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Namespace")
	h.Add("Vary", "Origin")
	return true
}

// authorized checks the bearer token, or, in make run's exception, that peer and Host are both loopback (a
// rebound DNS name pointing a page's requests at 127.0.0.1 keeps its own Host).
func (o ServerOptions) authorized(r *http.Request) bool {
	if o.Token != "" {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		return ok && subtle.ConstantTimeCompare([]byte(got), []byte(o.Token)) == 1
	}
	peer, _, _ := net.SplitHostPort(r.RemoteAddr)
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	return o.LoopbackWithoutToken && isLoopback(peer) && (isLoopback(host) || host == "localhost")
}

func isLoopback(host string) bool {
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
