package tests

// Issue 39 item 3 on the cluster (make test-e2e-cluster): who may do what. captchaflow's worker and ingress write
// in captchaflow's namespace; the caller team (shop) writes in its own and reaches captchaflow only through the
// endpoint; the operator reads both; a client without a token, or without a certificate, is refused.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nexus-rpc/sdk-go/nexus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/tests/devstack"
)

// TestE2E_Nexus_AuthorizationMatrix: shop's credential solves through the endpoint but cannot start, signal,
// query, reset, terminate or read a captchaflow task, nor call the endpoint's HTTP route itself; the operator
// reads both namespaces and writes neither; no token, or no client certificate, gets nothing. Skipped on a server that does not authorize (the dev server).
func TestE2E_Nexus_AuthorizationMatrix(t *testing.T) {
	s := requireStack(t)
	if s.creds == nil {
		t.Skip(envExternalCredentials + " is not set: the server under test does not authorize (the dev server)")
	}
	shop := shopClient(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tr := newScenario(t, s, "authz").add(1, taskSpec{Kind: "through nexus, under attack", SolveMS: 3000})[0]
	run, err := callThroughNexus(ctx, shop, tr.ID+"-caller", tr.ID, s.input(tr.taskSpec))
	require.NoError(t, err, "shop may start workflows in its own namespace")
	require.Eventually(t, func() bool { _, err := s.c.DescribeWorkflow(ctx, tr.ID, ""); return err == nil },
		30*time.Second, 100*time.Millisecond, "the endpoint started the task in captchaflow's namespace")

	shopInCaptchaflow, err := s.dialAs(ctx, roleShop, s.namespace)
	require.NoError(t, err)
	defer shopInCaptchaflow.Close()
	for what, err := range directAccess(ctx, shopInCaptchaflow, s.namespace, tr.ID) {
		assertDenied(t, err, "shop: "+what+" a captchaflow task directly")
	}

	var viaEndpoint, own captchaflow.Result
	require.NoError(t, run.Get(ctx, &viaEndpoint), "shop solves through the endpoint")
	require.NoError(t, s.c.GetWorkflow(ctx, tr.ID, "").Get(ctx, &own))
	assert.Equal(t, own, viaEndpoint)
	assert.NotEmpty(t, viaEndpoint.Code)

	checkOperator(ctx, t, s, tr.ID, run.GetID())
	checkNoCredential(ctx, t, s, tr.ID)
	admin, err := s.dialAs(ctx, roleAdmin, s.namespace)
	require.NoError(t, err)
	defer admin.Close()
	checkEndpointHTTP(ctx, t, s, admin)
}

// directAccess tries, as c, each thing a client of captchaflow's namespace could do to task id.
func directAccess(ctx context.Context, c client.Client, namespace, id string) map[string]error {
	_, start := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id + "-forged", TaskQueue: captchaflow.DefaultTaskQueue},
		captchaflow.WorkflowType, captchaflow.Input{})
	_, query := c.QueryWorkflow(ctx, id, "", captchaflow.StatusQuery)
	_, describe := c.DescribeWorkflow(ctx, id, "")
	_, reset := c.ResetWorkflowExecution(ctx, &workflowservice.ResetWorkflowExecutionRequest{Namespace: namespace,
		WorkflowExecution: &commonpb.WorkflowExecution{WorkflowId: id}, Reason: "forged", WorkflowTaskFinishEventId: 3, RequestId: id + "-reset"})
	history := c.GetWorkflowHistory(ctx, id, "", false, 0)
	var read error
	if history.HasNext() {
		_, read = history.Next()
	}
	_, list := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: namespace})
	return map[string]error{
		"start": start, "query": query, "describe": describe, "reset": reset, "read the history of": read, "list": list,
		"signal":    c.SignalWorkflow(ctx, id, "", "callback", "forged code"),
		"terminate": c.TerminateWorkflow(ctx, id, "", "forged"),
	}
}

func assertDenied(t *testing.T, err error, what string) {
	t.Helper()
	var denied *serviceerror.PermissionDenied
	assert.True(t, errors.As(err, &denied), "%s: want PermissionDenied, got %v", what, err)
}

// checkOperator: the operator reads the task and the caller's workflow, and may start neither.
func checkOperator(ctx context.Context, t *testing.T, s *stack, taskID, callerID string) {
	for _, ns := range []struct{ namespace, id string }{{s.namespace, taskID}, {devstack.CallerNamespace, callerID}} {
		op, err := s.dialAs(ctx, roleOperator, ns.namespace)
		require.NoError(t, err)
		_, err = op.DescribeWorkflow(ctx, ns.id, "")
		assert.NoError(t, err, "operator: describe in %s", ns.namespace)
		history := op.GetWorkflowHistory(ctx, ns.id, "", false, 0)
		require.True(t, history.HasNext())
		_, err = history.Next()
		assert.NoError(t, err, "operator: read history in %s", ns.namespace)
		_, err = op.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: ns.id + "-operator", TaskQueue: callerQueue},
			captchaflow.NexusCallerWorkflowType, captchaflow.NexusCall{})
		assertDenied(t, err, "operator: start in "+ns.namespace)
		assertDenied(t, op.SignalWorkflow(ctx, ns.id, "", "callback", "x"), "operator: signal in "+ns.namespace)
		op.Close()
	}
}

// checkNoCredential: a certificate without a token is refused every call; no certificate, the connection itself.
func checkNoCredential(ctx context.Context, t *testing.T, s *stack, taskID string) {
	opts, err := s.clientOptions(roleCaptchaflow, s.namespace)
	require.NoError(t, err)
	opts.Credentials = nil // the certificate of captchaflow's own worker, but no token
	c, err := client.DialContext(ctx, opts)
	require.NoError(t, err, "the health check needs no token")
	for what, err := range directAccess(ctx, c, s.namespace, taskID) {
		assertDenied(t, err, "no token: "+what)
	}
	c.Close()

	pool := x509.NewCertPool()
	pem, err := os.ReadFile(s.clientEnv(roleCaptchaflow)["TEMPORAL_TLS_SERVER_CA_CERT_PATH"])
	require.NoError(t, err)
	require.True(t, pool.AppendCertsFromPEM(pem))
	opts, err = s.clientOptions(roleCaptchaflow, s.namespace)
	require.NoError(t, err)
	opts.ConnectionOptions.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12} // a token, no certificate
	dialCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err = client.DialContext(dialCtx, opts)
	if err == nil {
		c.Close()
	}
	require.Error(t, err, "a client without a certificate is refused at the handshake")
	assert.False(t, errors.As(err, new(*serviceerror.PermissionDenied)), "refused by TLS, before any authorization: %v", err)
}

// TestE2E_NexusCallerNotListed: the server lets a workflow of any namespace call the endpoint; the worker, told
// NEXUS_CALLER_NAMESPACES=shop, refuses one of captchaflow's own namespace Unauthorized, and starts nothing.
func TestE2E_NexusCallerNotListed(t *testing.T) {
	s := requireStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	refused := nexusMetrics(s, map[string]float64{"solve refused": 1})
	before, err := metricsSnapshot(ctx, refused)
	require.NoError(t, err)
	tr, run := startUnlistedCaller(ctx, t, s, "unlisted", worker.Options{})
	err = run.Get(ctx, nil)
	var handlerErr *nexus.HandlerError
	require.ErrorAs(t, err, &handlerErr, "%v", err)
	assert.Equal(t, nexus.HandlerErrorTypeUnauthorized, handlerErr.Type)
	_, err = s.c.DescribeWorkflow(ctx, tr.ID, "")
	assert.True(t, errors.As(err, new(*serviceerror.NotFound)), "no task started: %v", err)
	metricsMoved(ctx, t, refused, before)
}

// startUnlistedCaller starts a caller's workflow in captchaflow's own namespace (not in NEXUS_CALLER_NAMESPACES), on
// a worker of its own (queue name-callers, options opts), solving one task through the endpoint.
func startUnlistedCaller(ctx context.Context, t *testing.T, s *stack, name string, opts worker.Options) (*taskRun, client.WorkflowRun) {
	shopClient(t, s) // the endpoint, on an external server too
	w := worker.New(s.c, name+"-callers", opts)
	w.RegisterWorkflowWithOptions(captchaflow.SolveViaNexus, workflow.RegisterOptions{Name: captchaflow.NexusCallerWorkflowType})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)
	tr := newScenario(t, s, name).add(1, taskSpec{Kind: "called from an unlisted namespace (" + name + ")"})[0]
	run, err := s.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: tr.ID + "-caller", TaskQueue: name + "-callers"},
		captchaflow.NexusCallerWorkflowType, captchaflow.NexusCall{SolveRequest: captchaflow.SolveRequest{TaskID: tr.ID, Input: s.input(tr.taskSpec)}})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = s.c.TerminateWorkflow(context.Background(), run.GetID(), "", "unlisted caller's test over")
	})
	return tr, run
}

// envExternalHTTPAddress is the external frontend's HTTP API (host:port), where Nexus endpoints also take requests.
const envExternalHTTPAddress = "E2E_TEMPORAL_HTTP_ADDRESS"

// checkEndpointHTTP: shop's credential, sent to the endpoint's HTTP route on the frontend, is refused 403 (the
// authorizer checks write in the endpoint's target namespace); only the server's own dispatch gets through.
func checkEndpointHTTP(ctx context.Context, t *testing.T, s *stack, admin client.Client) {
	addr := os.Getenv(envExternalHTTPAddress)
	if addr == "" {
		t.Log(envExternalHTTPAddress + " is not set: the endpoint's HTTP route is not tried")
		return
	}
	resp, err := admin.OperatorService().ListNexusEndpoints(ctx, &operatorservice.ListNexusEndpointsRequest{Name: captchaflow.NexusEndpoint})
	require.NoError(t, err)
	require.Len(t, resp.GetEndpoints(), 1)
	env := s.clientEnv(roleShop)
	cert, err := tls.LoadX509KeyPair(env["TEMPORAL_TLS_CLIENT_CERT_PATH"], env["TEMPORAL_TLS_CLIENT_KEY_PATH"])
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pem, err := os.ReadFile(env["TEMPORAL_TLS_SERVER_CA_CERT_PATH"])
	require.NoError(t, err)
	require.True(t, pool.AppendCertsFromPEM(pem))
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	url := "https://" + addr + "/nexus/endpoints/" + resp.GetEndpoints()[0].GetId() + "/services/" +
		captchaflow.NexusServiceName + "/" + captchaflow.OperationReport
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"task_id":"forged","verdict":"bad"}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+env["TEMPORAL_API_KEY"])
	req.Header.Set("Content-Type", "application/json")
	res, err := hc.Do(req)
	require.NoError(t, err)
	_ = res.Body.Close()
	assert.Equal(t, http.StatusForbidden, res.StatusCode, "shop: the endpoint's HTTP route, directly")
}
