package devstack

import (
	"context"
	"errors"
	"fmt"

	nexuspb "go.temporal.io/api/nexus/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/captchaflow/captchaflow"
)

// CallerNamespace is the caller team's namespace: its workflows reach captchaflow only through the endpoint.
const CallerNamespace = "shop"

// nexusDynamicConfig is what Nexus needs of the server (docs/operations.md): a worker-target endpoint's callbacks
// use temporal://system, which every server allows; an external target's use the template, checked against
// callback.allowedAddresses.
func nexusDynamicConfig(httpPort int) map[string]string {
	return map[string]string{
		"component.nexusoperations.callback.endpoint.template": fmt.Sprintf(`"http://%s/namespaces/{{.NamespaceName}}/nexus/callback"`, loopback(httpPort)),
		"callback.allowedAddresses":                            `[{"Pattern": "127.0.0.1:*", "AllowInsecure": true}]`,
		"component.nexusoperations.disallowedHeaders":          disallowedNexusHeaders,
	}
}

// disallowedNexusHeaders are the server's defaults and nexus-link, which a caller could otherwise overwrite with a
// link naming another namespace (deploy/temporal/dynamicconfig.yaml says the same).
const disallowedNexusHeaders = `["request-timeout", "xdc-redirection-api", "xdc-redirection-source-cell", "xdc-redirection", ` +
	`"caller-name", "caller-type", "call-initiation", "temporal-principal-type", "temporal-principal-name", "nexus-link"]`

// SetUpNexus registers CallerNamespace and creates the captchaflow endpoint, targeting the worker's namespace
// and task queue, each only if missing.
func SetUpNexus(ctx context.Context, c client.Client, namespace, taskQueue string) error {
	_, err := c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: CallerNamespace, WorkflowExecutionRetentionPeriod: durationpb.New(namespaceRetention)})
	if err != nil && !errors.As(err, new(*serviceerror.NamespaceAlreadyExists)) {
		return fmt.Errorf("register namespace %s: %w", CallerNamespace, err)
	}
	target := &nexuspb.EndpointTarget_Worker{Namespace: namespace, TaskQueue: taskQueue}
	_, err = c.OperatorService().CreateNexusEndpoint(ctx, &operatorservice.CreateNexusEndpointRequest{Spec: &nexuspb.EndpointSpec{
		Name: captchaflow.NexusEndpoint, Target: &nexuspb.EndpointTarget{Variant: &nexuspb.EndpointTarget_Worker_{Worker: target}}}})
	if err != nil && !errors.As(err, new(*serviceerror.AlreadyExists)) {
		return fmt.Errorf("create Nexus endpoint %s: %w", captchaflow.NexusEndpoint, err)
	}
	return nil
}
