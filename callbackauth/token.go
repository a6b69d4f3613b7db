// Package callbackauth binds a provider callback URL to one workflow.
//
// The provider calls back an URL we hand it at submission time. The token in that URL is an HMAC of the workflow ID
// under CALLBACK_SECRET, so a caller that does not know the secret cannot signal a workflow, and a token for one
// task is useless for another. The secret itself never leaves the worker and the ingress.
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

// CallbackPath is the route prefix the ingress serves; the workflow ID follows it as one path segment.
const CallbackPath = "/callback/"

// TokenParam is the query parameter that carries the token.
const TokenParam = "t"

// RunParam, SubmissionParam and ProviderParam name the run, the submission and the provider a pingback URL was made
// for; the token signs them.
const (
	RunParam        = "r"
	SubmissionParam = "s"
	ProviderParam   = "p"
)

// FlavorParam names a createTask provider's flavor in its pingback URL, so the ingress reads its callback body. It
// is not signed (the token is): a wrong one only makes the body unreadable.
const FlavorParam = "f"

// Submission names one submission of one run of a workflow, as a pingback URL carries it, and the provider the URL
// was handed to ("" on a worker without PROVIDERS_FILE): each candidate of a routed submission gets its own URL, so
// its callback is never taken for another's.
type Submission struct {
	RunID    string
	N        int
	Provider string
}

// named is the message a submission's token signs: the workflow ID, the run, the number and the provider if any,
// each unambiguous (neither a workflow ID nor a provider name can hold a newline).
func (s Submission) named(workflowID string) string {
	msg := workflowID + "\n" + s.RunID + "\n" + strconv.Itoa(s.N)
	if s.Provider != "" {
		msg += "\n" + s.Provider
	}
	return msg
}

// Token returns the lowercase hex HMAC-SHA256 of workflowID under secret.
func Token(secret, workflowID string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(workflowID))
	return hex.EncodeToString(mac.Sum(nil))
}

// TokenFor returns the token of one submission's pingback URL.
func TokenFor(secret, workflowID string, sub Submission) string {
	return Token(secret, sub.named(workflowID))
}

// ValidFor reports whether token was made for this submission of workflowID under any of the non-empty secrets
// (the current one and, during a rotation, the previous one). Comparison is constant-time.
func ValidFor(token, workflowID string, sub Submission, secrets ...string) bool {
	return valid(token, sub.named(workflowID), secrets...)
}

// valid reports whether token is the HMAC of message under any of the non-empty secrets.
func valid(token, message string, secrets ...string) bool {
	got, err := hex.DecodeString(token)
	if err != nil || len(got) != sha256.Size {
		return false
	}
	ok := false
	for _, s := range secrets {
		if s == "" {
			continue
		}
		want, _ := hex.DecodeString(Token(s, message))
		// Keep checking every secret so the time taken does not tell which one matched.
		if hmac.Equal(got, want) {
			ok = true
		}
	}
	return ok
}

// URLFor builds the pingback URL of one submission under baseURL (the ingress's public base, e.g.
// https://cb.example.com or http://127.0.0.1:8080/prefix): it names the run and the submission, and its token signs
// them, so a callback tells which submission it answers even when in.php's answer (the provider's ID) was lost.
func URLFor(baseURL, workflowID, secret string, sub Submission) (string, error) {
	if sub.RunID == "" || sub.N < 1 {
		return "", errors.New("a submission's pingback URL needs its run ID and number")
	}
	query := url.Values{TokenParam: {TokenFor(secret, workflowID, sub)}, RunParam: {sub.RunID}, SubmissionParam: {strconv.Itoa(sub.N)}}
	if sub.Provider != "" {
		query.Set(ProviderParam, sub.Provider)
	}
	return build(baseURL, workflowID, secret, query)
}

func build(baseURL, workflowID, secret string, query url.Values) (string, error) {
	if secret == "" {
		return "", errors.New("callback secret is empty")
	}
	base, err := url.Parse(baseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return "", errors.New("callback base URL must be an absolute http(s) URL")
	}
	// Path and RawPath are set together so the workflow ID is escaped exactly once: an escaped ID put in Path
	// alone is escaped again by String(), and the ingress would read "a%20b" back for "a b".
	rawPath := strings.TrimSuffix(base.EscapedPath(), "/") + CallbackPath + url.PathEscape(workflowID)
	path, err := url.PathUnescape(rawPath)
	if err != nil {
		return "", errors.New("callback base URL has an invalid path escape")
	}
	base.Path, base.RawPath = path, rawPath
	base.RawQuery = query.Encode()
	base.Fragment = ""
	return base.String(), nil
}
