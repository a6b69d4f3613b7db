package tests

import (
	"context"
	"net/url"
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

// sendTokened sends a callback on the tokened route /callback/<workflow ID>?t=token.
func (s *stack) sendTokened(ctx context.Context, workflowID, providerID, code, token string) (int, string) {
	return s.sendCallback(ctx, callbackPathPrefix+url.PathEscape(workflowID),
		url.Values{"t": {token}, "id": {providerID}, "code": {code}})
}

// sendUntokened sends a callback on the bare route /callback?id=&code=.
func (s *stack) sendUntokened(ctx context.Context, providerID, code string) (int, string) {
	return s.sendCallback(ctx, "/callback", url.Values{"id": {providerID}, "code": {code}})
}
