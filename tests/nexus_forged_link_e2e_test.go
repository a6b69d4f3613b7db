package tests

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporalnexus"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow/tests/devstack"
)

// TestE2E_NexusCallerForgedLink: a caller of an unlisted namespace that sets the nexus-link header itself, naming a
// workflow of shop, is refused by the server (the stacks disallow the header), and no task starts: without that,
// the server lets the caller's header overwrite its own link and the worker would serve it as shop.
func TestE2E_NexusCallerForgedLink(t *testing.T) {
	s := requireStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tr, run := startUnlistedCaller(ctx, t, s, "forged", worker.Options{Interceptors: []interceptor.WorkerInterceptor{&forgeLink{}}})
	eventually(t, "the caller's workflow task refused", 30*time.Second, 200*time.Millisecond, func() string {
		if _, err := s.c.DescribeWorkflow(ctx, tr.ID, ""); err == nil {
			t.Fatalf("the forged caller started task %s", tr.ID)
		}
		for iter := s.c.GetWorkflowHistory(ctx, run.GetID(), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT); iter.HasNext(); {
			if ev, err := iter.Next(); err == nil && ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED {
				return ""
			}
		}
		return "no failed workflow task yet"
	})
	_, err := s.c.DescribeWorkflow(ctx, tr.ID, "")
	assert.True(t, errors.As(err, new(*serviceerror.NotFound)), "no task started: %v", err)
}

// forgeLink sets the nexus-link header of every Nexus operation to a link naming a workflow of shop.
type forgeLink struct {
	interceptor.WorkerInterceptorBase
}

func (*forgeLink) InterceptWorkflow(_ workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	return &forgeLinkInbound{WorkflowInboundInterceptorBase: interceptor.WorkflowInboundInterceptorBase{Next: next}}
}

type forgeLinkInbound struct {
	interceptor.WorkflowInboundInterceptorBase
}

func (i *forgeLinkInbound) Init(out interceptor.WorkflowOutboundInterceptor) error {
	return i.Next.Init(&forgeLinkOutbound{WorkflowOutboundInterceptorBase: interceptor.WorkflowOutboundInterceptorBase{Next: out}})
}

type forgeLinkOutbound struct {
	interceptor.WorkflowOutboundInterceptorBase
}

func (o *forgeLinkOutbound) ExecuteNexusOperation(ctx workflow.Context, in interceptor.ExecuteNexusOperationInput) workflow.NexusOperationFuture {
	in.NexusHeader = map[string]string{"nexus-link": forgedLink}
	return o.Next.ExecuteNexusOperation(ctx, in)
}

// forgedLink is a Nexus-Link header value naming a workflow of shop (made once: its encoding iterates a map).
var forgedLink = func() string {
	l := temporalnexus.ConvertLinkWorkflowEventToNexusLink(&commonpb.Link_WorkflowEvent{Namespace: devstack.CallerNamespace,
		WorkflowId: "forged", RunId: "00000000-0000-4000-8000-000000000000", Reference: &commonpb.Link_WorkflowEvent_EventRef{
			EventRef: &commonpb.Link_WorkflowEvent_EventReference{EventId: 1, EventType: enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED}}})
	return fmt.Sprintf(`<%s>; type="%s"`, l.URL, l.Type)
}()
