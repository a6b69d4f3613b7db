package callbackauth

import (
	"net/url"
	"strings"
	"testing"
)

// Fuzz targets for the token check and the callback URL; seeds are in testdata/fuzz/<target>/. Run one with
//
//	go test ./callbackauth/ -run '^$' -fuzz '^FuzzValid$' -fuzztime 60s

// FuzzValid: Valid never panics, accepts exactly the token of the workflow ID under a configured secret (hex in
// either case) and nothing else, and accepts nothing when no secret is configured.
func FuzzValid(f *testing.F) {
	f.Add("s3cret", "task-1", "ae4d8b5724af3e00918d8b9ca7c3e66b87bf0657934dbc4aa6098206725fb677")
	f.Add("s3cret", "task-1", "AE4D8B5724AF3E00918D8B9CA7C3E66B87BF0657934DBC4AA6098206725FB677")
	f.Add("s3cret", "task-2", "ae4d8b5724af3e00918d8b9ca7c3e66b87bf0657934dbc4aa6098206725fb677")
	f.Add("", "task-1", "")
	f.Add("k", "", "zz")
	f.Add("k", "w", "ae4d8b5724af3e00918d8b9ca7c3e66b87bf0657934dbc4aa6098206725fb6")
	f.Fuzz(func(t *testing.T, secret, workflowID, token string) {
		want := Token(secret, workflowID)
		got := valid(token, workflowID, secret)
		if secret == "" {
			if got || valid(want, workflowID, "", "") {
				t.Fatal("a token was accepted with no secret configured")
			}
			return
		}
		if got != strings.EqualFold(token, want) {
			t.Fatalf("valid(%q, %q) = %v, but the token is %q", token, workflowID, got, want)
		}
		if !valid(want, workflowID, "other-secret", secret) || !valid(strings.ToUpper(want), workflowID, secret) {
			t.Fatal("the workflow's own token was refused")
		}
		if valid(want, workflowID+"x", secret) {
			t.Fatal("a token was accepted for another workflow ID")
		}
	})
}

// FuzzURL: URLFor never panics, and when it builds a URL the ingress reads the same workflow ID and a valid token
// back from it, whatever characters the ID or the base path hold.
func FuzzURL(f *testing.F) {
	f.Add("http://127.0.0.1:8080/", "task:1", "s")
	f.Add("https://cb.example.com/prefix", "a.b", "s")
	f.Add("http://x/p%20q", "a b/c%d", "s")
	f.Add("ftp://x", "id", "s")
	f.Add("http://x?q=1#frag", "id", "")
	f.Fuzz(func(t *testing.T, baseURL, workflowID, secret string) {
		built, err := URLFor(baseURL, workflowID, secret, testSub)
		if err != nil {
			return
		}
		u, err := url.Parse(built)
		if err != nil {
			t.Fatalf("URL built %q, which does not parse: %v", built, err)
		}
		prefix, segment, ok := cutLast(u.EscapedPath(), CallbackPath)
		if !ok {
			t.Fatalf("%q has no %s segment", built, CallbackPath)
		}
		if strings.Contains(segment, "/") {
			t.Fatalf("workflow ID %q spans more than one path segment in %q", workflowID, built)
		}
		gotID, err := url.PathUnescape(segment)
		if err != nil || gotID != workflowID {
			t.Fatalf("%q carries workflow ID %q (%v), want %q", built, gotID, err, workflowID)
		}
		if base, _ := url.Parse(baseURL); base != nil && strings.TrimSuffix(base.EscapedPath(), "/") != prefix {
			t.Fatalf("%q lost the base path of %q", built, baseURL)
		}
		if !ValidFor(u.Query().Get(TokenParam), workflowID, testSub, secret) {
			t.Fatalf("%q carries no valid token", built)
		}
	})
}

// cutLast splits s around the last sep.
func cutLast(s, sep string) (before, after string, found bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}
