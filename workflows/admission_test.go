package workflows

// Admission under PROVIDER_THREADS against a stand-in for the semaphore that enforces the plan (issue 20, findings
// 6 and 7).

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

// planSemaphore grants a slot (by signal) when asked while fewer than plan are held, else queues the request (a
// re-ask then finds it free). It counts the task's open submissions (lost answers included) against
// the slots held.
type planSemaphore struct {
	t      *testing.T
	env    *testsuite.TestWorkflowEnvironment
	plan   int
	held   []int // seq of the slots held
	queued []int
	open   int // in.php requests made whose submission may still be solving
	start  time.Time
}

func newPlanSemaphore(t *testing.T, plan int) *planSemaphore {
	var ts testsuite.WorkflowTestSuite
	p := &planSemaphore{t: t, env: ts.NewTestWorkflowEnvironment(), plan: plan}
	p.start = p.env.Now()
	// Wall-clock guards of the test environment: 1 s and 3 s by default, which a loaded 2-core machine overruns.
	p.env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: 10 * time.Second})
	p.env.SetTestTimeout(30 * time.Second)
	Register(p.env, &activities.Activities{}, Settings{ProviderThreads: plan})
	p.env.OnActivity(acts.AcquireSlot, mock.Anything, mock.Anything).Return(p.acquire)
	p.env.OnActivity(acts.ReleaseSlot, mock.Anything, mock.Anything).Return(func(_ context.Context, rel activities.SlotRequest) error {
		p.release(rel.Seq)
		return nil
	})
	return p
}

func (p *planSemaphore) acquire(_ context.Context, ask activities.SlotAsk) (activities.SlotTicket, error) {
	t := activities.SlotTicket{Semaphore: testSemaphore, Run: "r1", RunID: ask.RunID}
	switch {
	case slices.Contains(p.held, ask.Seq) || len(p.held) < p.plan:
		p.release(ask.Seq) // out of the queue
		p.held = append(p.held, ask.Seq)
		p.env.RegisterDelayedCallback(func() {
			p.env.SignalWorkflow(activities.SlotGrantedSignal, activities.SlotRequest{Seq: ask.Seq, RunID: ask.RunID, Semaphore: testSemaphore})
		}, 0)
	case !slices.Contains(p.queued, ask.Seq):
		p.queued = append(p.queued, ask.Seq)
	}
	return t, nil
}

func (p *planSemaphore) release(seq int) {
	p.held = slices.DeleteFunc(p.held, func(s int) bool { return s == seq })
	p.queued = slices.DeleteFunc(p.queued, func(s int) bool { return s == seq })
}

// submits answers each in.php request with outcome (a provider task ID, or an error), checking that every
// submission that may be solving, this one included, is covered by a slot held.
func (p *planSemaphore) submits(outcomes ...any) {
	for _, o := range outcomes {
		p.env.OnActivity(acts.Submit, mock.Anything, mock.Anything).Once().Return(
			func(context.Context, activities.SubmitRequest) (activities.SubmitResult, error) {
				p.open++
				assert.LessOrEqual(p.t, p.open, len(p.held), "open submissions vs slots held (seq %v) at %v, plan %d",
					p.held, p.env.Now().Sub(p.start), p.plan)
				if err, ok := o.(error); ok {
					return activities.SubmitResult{}, err
				}
				return activities.SubmitResult{ProviderTaskID: o.(string)}, nil
			})
	}
}

// Finding 6: submission 1's in.php answer is lost; its wait ends at 60 s and its answer comes 19 s later. Until
// then it may be solving, so it keeps its slot: under a plan of 1 the next submission waits for a slot (and the
// late answer ends the task), under a plan of 2 it goes out under a second slot.
func TestLostSubmissionKeepsItsSlotUntilSettled(t *testing.T) {
	for _, plan := range []int{1, 2} {
		t.Run(fmt.Sprintf("plan %d", plan), func(t *testing.T) {
			p := newPlanSemaphore(t, plan)
			p.submits(lostAnswer(), "222")
			p.env.RegisterDelayedCallback(func() {
				p.open-- // its answer: settled
				p.env.SignalWorkflow(captchaflow.CallbackSignal, captchaflow.Callback{ProviderTaskID: "111",
					Code: "CODE-111", Authenticated: true, RunID: testRunID, Submission: 1})
			}, 79*time.Second)
			in := recaptcha()
			in.LostAnswerWaitSeconds = 60
			p.env.ExecuteWorkflow(captchaflow.WorkflowType, in)

			require.NoError(t, p.env.GetWorkflowError())
			var r captchaflow.Result
			require.NoError(t, p.env.GetWorkflowResult(&r))
			assert.Equal(t, "CODE-111", r.Code)
			assert.Equal(t, plan, r.Submits, "in.php requests: a second one only with a second slot free")
			assert.Empty(t, p.held, "every slot is given back when the task ends")
			assert.Empty(t, p.queued)
		})
	}
}

// A lost submission that calls back unsolvable after its wait has settled: its slot goes back at the next ask, and
// under a plan of 1 the next submission, queued behind it, takes it.
func TestLostSubmissionCalledBackUnsolvableGivesItsSlotBack(t *testing.T) {
	p := newPlanSemaphore(t, 1)
	p.submits(lostAnswer(), "222")
	p.env.RegisterDelayedCallback(func() {
		p.open--
		p.env.SignalWorkflow(captchaflow.CallbackSignal, captchaflow.Callback{ProviderTaskID: "111",
			Code: "ERROR_CAPTCHA_UNSOLVABLE", Authenticated: true, RunID: testRunID, Submission: 1})
	}, 70*time.Second)
	p.env.RegisterDelayedCallback(func() {
		p.env.SignalWorkflow(captchaflow.CallbackSignal, captchaflow.Callback{ProviderTaskID: "222",
			Code: "CODE-222", Authenticated: true, RunID: testRunID, Submission: 2})
	}, 175*time.Second) // after the re-asks that may take the freed slot (every 30 s), within 222's callback timeout
	in := recaptcha()
	in.LostAnswerWaitSeconds = 60
	p.env.ExecuteWorkflow(captchaflow.WorkflowType, in)

	require.NoError(t, p.env.GetWorkflowError())
	var r captchaflow.Result
	require.NoError(t, p.env.GetWorkflowResult(&r))
	assert.Equal(t, "CODE-222", r.Code)
	assert.Empty(t, p.held)
}
