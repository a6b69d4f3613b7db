package captchaflow

import (
	"testing"

	"github.com/nexus-rpc/sdk-go/nexus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/temporalnexus"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// solveThroughNexus runs SolveViaNexus against the handler, SolveCaptcha replaced by fake.
func solveThroughNexus(t *testing.T, req SolveRequest, fake func(workflow.Context, Input) (Result, error)) (Result, error) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(fake, workflow.RegisterOptions{Name: WorkflowType})
	env.RegisterNexusService(NexusService())
	env.ExecuteWorkflow(SolveViaNexus, NexusCall{SolveRequest: req})
	require.True(t, env.IsWorkflowCompleted())
	var res Result
	if err := env.GetWorkflowError(); err != nil {
		return res, err
	}
	require.NoError(t, env.GetWorkflowResult(&res))
	return res, nil
}

func TestSolveViaNexusReturnsTheTasksResult(t *testing.T) {
	res, err := solveThroughNexus(t, SolveRequest{TaskID: "order-42", Input: validInput()}, func(ctx workflow.Context, in Input) (Result, error) {
		assert.Equal(t, "order-42", workflow.GetInfo(ctx).WorkflowExecution.ID)
		return Result{Code: "tok-" + in.Params["sitekey"]}, nil
	})
	require.NoError(t, err)
	assert.Equal(t, "tok-0x4AAA", res.Code)
}

func TestSolveViaNexusFailuresKeepTheirType(t *testing.T) {
	_, err := solveThroughNexus(t, SolveRequest{TaskID: "order-43", Input: validInput()}, func(workflow.Context, Input) (Result, error) {
		return Result{}, temporal.NewNonRetryableApplicationError("every submission came back unsolvable", FailureUnsolvable, nil)
	})
	assert.Equal(t, FailureUnsolvable, FailureType(err), "%v", err)

	bad := validInput()
	bad.Params["key"] = "provider-key"
	_, err = solveThroughNexus(t, SolveRequest{TaskID: "order-44", Input: bad}, func(workflow.Context, Input) (Result, error) {
		t.Error("a bad input started a task")
		return Result{}, nil
	})
	assert.Equal(t, FailureInvalidInput, FailureType(err), "%v", err)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, err, &appErr)
	assert.Contains(t, appErr.Message(), "params.key", "the field the caller must fix")
}

func TestReportViaNexusRefusesABadVerdictTyped(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterNexusService(NexusService())
	env.ExecuteWorkflow(func(ctx workflow.Context) error {
		c := workflow.NewNexusClient(NexusEndpoint, NexusServiceName)
		return c.ExecuteOperation(ctx, OperationReport, ReportRequest{TaskID: "order-42", Verdict: "meh"}, workflow.NexusOperationOptions{}).Get(ctx, nil)
	})
	require.True(t, env.IsWorkflowCompleted())
	assert.Equal(t, FailureInvalidInput, FailureType(env.GetWorkflowError()), "%v", env.GetWorkflowError())
}

// TestNexusServesOnlyListedCallers: given callers, an operation is served when the server's link names a listed
// namespace, and refused Unauthorized (not retried) when it names another or there is none.
func TestNexusServesOnlyListedCallers(t *testing.T) {
	link := func(ns string) []nexus.Link {
		return []nexus.Link{temporalnexus.ConvertLinkWorkflowEventToNexusLink(&commonpb.Link_WorkflowEvent{
			Namespace: ns, WorkflowId: "caller", RunId: "run",
			Reference: &commonpb.Link_WorkflowEvent_EventRef{EventRef: &commonpb.Link_WorkflowEvent_EventReference{EventId: 5}}})}
	}
	assert.NoError(t, callerRefused(nil, nil), "no list: every caller")
	assert.NoError(t, callerRefused([]string{"shop", "qa"}, link("qa")))
	assert.NoError(t, callerRefused([]string{"shop", " qa"}, link("qa")), "the list as NEXUS_CALLER_NAMESPACES=\"shop, qa\" gives it")
	for _, links := range [][]nexus.Link{link("intruder"), nil, {{Type: "other"}}} {
		var handlerErr *nexus.HandlerError
		require.ErrorAs(t, callerRefused([]string{"shop"}, links), &handlerErr)
		assert.Equal(t, nexus.HandlerErrorTypeUnauthorized, handlerErr.Type)
		assert.False(t, handlerErr.Retryable())
	}
}
