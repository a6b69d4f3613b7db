package callbackauth

import (
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTokenIsHexHMACOfWorkflowID(t *testing.T) {
	// Reference value from: printf 'task-1' | openssl dgst -sha256 -hmac s3cret
	assert.Equal(t, "ae4d8b5724af3e00918d8b9ca7c3e66b87bf0657934dbc4aa6098206725fb677", Token("s3cret", "task-1"))
	assert.NotEqual(t, Token("s3cret", "task-1"), Token("s3cret", "task-2"))
	assert.NotEqual(t, Token("s3cret", "task-1"), Token("other", "task-1"))
}

func TestValidAcceptsCurrentAndPreviousSecret(t *testing.T) {
	tok := Token("old", "task-1")
	assert.True(t, valid(tok, "task-1", "new", "old"), "previous secret accepted during rotation")
	assert.True(t, valid(Token("new", "task-1"), "task-1", "new", ""))
	assert.False(t, valid(tok, "task-1", "new", ""), "rotated-out secret refused")
	assert.False(t, valid(tok, "task-2", "new", "old"), "token bound to its workflow ID")
	assert.False(t, valid("", "task-1", "new"))
	assert.False(t, valid("zz", "task-1", "new"))
	assert.False(t, valid(tok[:10], "task-1", "old"))
	assert.False(t, valid(tok, "task-1"), "no secret configured accepts nothing")
}

// testSub is the submission the URL tests build for.
var testSub = Submission{RunID: "run-1", N: 1}

func TestURL(t *testing.T) {
	got, err := URLFor("http://127.0.0.1:8080/", "task:1", "s", testSub)
	require.NoError(t, err)
	u, err := url.Parse(got)
	require.NoError(t, err)
	assert.Equal(t, "/callback/task:1", u.Path)
	assert.Equal(t, TokenFor("s", "task:1", testSub), u.Query().Get(TokenParam))

	got, err = URLFor("https://cb.example.com/prefix", "a.b", "s", testSub)
	require.NoError(t, err)
	assert.Contains(t, got, "https://cb.example.com/prefix/callback/a.b?r=run-1&s=1&t=")

	for _, bad := range []string{"", "ftp://x", "/relative", "http://"} {
		_, err := URLFor(bad, "id", "s", testSub)
		assert.Error(t, err, bad)
	}
	_, err = URLFor("http://x", "id", "", testSub)
	assert.EqualError(t, err, "callback secret is empty")
}

func TestURLForSignsTheRunAndSubmission(t *testing.T) {
	sub := Submission{RunID: "run-1", N: 3}
	got, err := URLFor("https://cb.example/base/", "order 42", "s3cret", sub)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(got)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if u.Path != "/base/callback/order 42" || q.Get(RunParam) != "run-1" || q.Get(SubmissionParam) != "3" {
		t.Fatalf("URL %s does not name the workflow, run and submission", got)
	}
	if !ValidFor(q.Get(TokenParam), "order 42", sub, "s3cret") {
		t.Fatalf("its token does not verify")
	}
	for _, other := range []Submission{{RunID: "run-1", N: 4}, {RunID: "run-2", N: 3}} {
		if ValidFor(q.Get(TokenParam), "order 42", other, "s3cret") {
			t.Errorf("the token of %+v verifies for %+v", sub, other)
		}
	}
	if valid(q.Get(TokenParam), "order 42", "s3cret") {
		t.Errorf("a submission's token verifies as the workflow's")
	}
	if _, err := URLFor("https://cb.example", "w", "s3cret", Submission{N: 1}); err == nil {
		t.Errorf("a URL without its run was built")
	}
}

// A trace is signed when the URL carries one; without it the token is v1.0.0's, so URLs already handed out verify.
func TestTheTokenCoversTheTraceOnlyWhenPresent(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	sub := Submission{RunID: "run-1", N: 2, Provider: "capsolver"}
	traced := sub
	traced.Trace = tp
	// v1.0.0's token: the HMAC of the four lines, no fifth.
	assert.Equal(t, Token("s", "wf\nrun-1\n2\ncapsolver"), TokenFor("s", "wf", sub))
	assert.Equal(t, Token("s", "wf\nrun-1\n2\ncapsolver\n"+tp), TokenFor("s", "wf", traced))
	assert.Equal(t, Token("s", "wf\nrun-1\n2\n\n"+tp), TokenFor("s", "wf", Submission{RunID: "run-1", N: 2, Trace: tp}))

	got, err := URLFor("https://cb.example", "wf", "s", traced)
	require.NoError(t, err)
	u, err := url.Parse(got)
	require.NoError(t, err)
	q := u.Query()
	assert.Equal(t, tp, q.Get(TraceParam))
	assert.True(t, ValidFor(q.Get(TokenParam), "wf", traced, "s"))
	assert.False(t, ValidFor(q.Get(TokenParam), "wf", sub, "s"), "the trace dropped from a traced URL")
	other := traced
	other.Trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01"
	assert.False(t, ValidFor(q.Get(TokenParam), "wf", other, "s"), "another parent span put in")
	assert.False(t, ValidFor(TokenFor("s", "wf", sub), "wf", traced, "s"), "a trace added to an untraced URL")

	plain, err := URLFor("https://cb.example", "wf", "s", sub)
	require.NoError(t, err)
	assert.NotContains(t, plain, TraceParam+"=")
}
