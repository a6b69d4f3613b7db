// Package callbackauth binds a pingback URL to one submission of one workflow run: its token is an HMAC under
// CALLBACK_SECRET, so a caller without the secret cannot signal a workflow, and one URL's token fits no other.
package callbackauth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/url"
	"strconv"
	"strings"
)

// CallbackPath is the route prefix the ingress serves; the workflow ID follows as one path segment.
const CallbackPath = "/callback/"

// Query parameters of a pingback URL: the token, and the run, submission, provider and trace it signs. FlavorParam
// names a createTask provider's body format; unsigned, a wrong one only makes the body unreadable.
const (
	TokenParam, RunParam, SubmissionParam, ProviderParam, FlavorParam, TraceParam = "t", "r", "s", "p", "f", "tp"
)

// Submission names one run's submission and the provider its URL went to ("" without PROVIDERS_FILE): one URL each.
type Submission struct {
	RunID    string
	N        int
	Provider string
	Trace    string // the submission's W3C traceparent, so the callback joins its trace; "" with tracing off
}

// Token is the hex HMAC-SHA256 of message under secret.
func Token(secret, message string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(message))
	return hex.EncodeToString(mac.Sum(nil))
}

// message is what a token signs, one field a line (none can hold a newline); without a provider, three; a trace
// adds a fifth line, so a URL without one signs what v1.0.0 signed.
func message(workflowID string, sub Submission) string {
	m := workflowID + "\n" + sub.RunID + "\n" + strconv.Itoa(sub.N) + "\n" + sub.Provider
	if sub.Trace != "" {
		return m + "\n" + sub.Trace
	}
	return strings.TrimSuffix(m, "\n")
}

// TokenFor returns the token of one submission's pingback URL.
func TokenFor(secret, workflowID string, sub Submission) string {
	return Token(secret, message(workflowID, sub))
}

// ValidFor reports whether token was made for this submission under any non-empty secret (current, previous).
func ValidFor(tok, workflowID string, sub Submission, secrets ...string) bool {
	return valid(tok, message(workflowID, sub), secrets...)
}

func valid(tok, message string, secrets ...string) bool {
	got, err := hex.DecodeString(tok)
	ok := false
	for _, s := range secrets {
		want, _ := hex.DecodeString(Token(s, message))
		ok = (s != "" && err == nil && hmac.Equal(got, want)) || ok // every secret checked: the time tells not which matched
	}
	return ok
}

// URLFor builds one submission's pingback URL under baseURL (the ingress's public base, path prefix allowed).
func URLFor(baseURL, workflowID, secret string, sub Submission) (string, error) {
	base, err := url.Parse(baseURL)
	switch {
	case sub.RunID == "" || sub.N < 1:
		return "", errors.New("a submission's pingback URL needs its run ID and number")
	case secret == "":
		return "", errors.New("callback secret is empty")
	case err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "":
		return "", errors.New("callback base URL must be an absolute http(s) URL")
	}
	// Path and RawPath together, so the workflow ID is escaped exactly once.
	rawPath := strings.TrimSuffix(base.EscapedPath(), "/") + CallbackPath + url.PathEscape(workflowID)
	if base.Path, err = url.PathUnescape(rawPath); err != nil {
		return "", errors.New("callback base URL has an invalid path escape")
	}
	query := url.Values{TokenParam: {TokenFor(secret, workflowID, sub)}, RunParam: {sub.RunID}, SubmissionParam: {strconv.Itoa(sub.N)}}
	for param, v := range map[string]string{ProviderParam: sub.Provider, TraceParam: sub.Trace} {
		if v != "" {
			query.Set(param, v)
		}
	}
	base.RawPath, base.RawQuery, base.Fragment = rawPath, query.Encode(), ""
	return base.String(), nil
}
