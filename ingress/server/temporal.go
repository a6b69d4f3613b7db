package server

import (
	"context"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
)

// TemporalClient is the part of client.Client the ingress uses, so tests can pass a fake. A real client.Client
// satisfies it.
type TemporalClient interface {
	SignalWorkflow(ctx context.Context, workflowID, runID, signalName string, arg any) error
	UpdateWorkflow(ctx context.Context, options client.UpdateWorkflowOptions) (client.WorkflowUpdateHandle, error)
	ListWorkflow(ctx context.Context, request *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error)
	CheckHealth(ctx context.Context, request *client.CheckHealthRequest) (*client.CheckHealthResponse, error)
}

var _ TemporalClient = client.Client(nil)
