package tests

import (
	"context"
	"net/url"

	"github.com/captchaflow/captchaflow/callbackauth"
)

// callbackPathPrefix starts the tokened route /callback/<workflow ID>: the path of every pingback URL a workflow
// registers, so simulator tasks map back to workflows by it.
const callbackPathPrefix = "/callback/"

// sendCallback GETs the ingress (through the callback proxy, as the provider would) and returns the status.
func (s *stack) sendCallback(ctx context.Context, path string, q url.Values) (int, string) {
	status, body, err := httpGet(ctx, s.callbackBaseURL()+path+"?"+q.Encode())
	if err != nil {
		return 0, err.Error()
	}
	return status, body
}

// sendTokened sends a callback on the tokened route /callback/<workflow ID>, as to its first submission's pingback
// URL signed with secret.
func (s *stack) sendTokened(ctx context.Context, workflowID, providerID, code, secret string) (int, string) {
	q := s.pingbackQuery(ctx, workflowID, secret)
	q.Set("id", providerID)
	q.Set("code", code)
	return s.sendCallback(ctx, callbackPathPrefix+url.PathEscape(workflowID), q)
}

// pingbackQuery is the query of the first submission's pingback URL of workflowID's current run, signed with secret.
func (s *stack) pingbackQuery(ctx context.Context, workflowID, secret string) url.Values {
	d, err := s.c.DescribeWorkflow(ctx, workflowID, "")
	run := "no-such-run"
	if err == nil {
		run = d.WorkflowExecution.RunID
	}
	sub := callbackauth.Submission{RunID: run, N: 1}
	return url.Values{callbackauth.RunParam: {run}, callbackauth.SubmissionParam: {"1"},
		callbackauth.TokenParam: {callbackauth.TokenFor(secret, workflowID, sub)}}
}

// sendUntokened sends a callback on the bare route /callback?id=&code=.
func (s *stack) sendUntokened(ctx context.Context, providerID, code string) (int, string) {
	return s.sendCallback(ctx, "/callback", url.Values{"id": {providerID}, "code": {code}})
}
