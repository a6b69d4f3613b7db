package tests

// A refresh (a token expired undelivered, deliverFresh solves again) asks for a slot with AcquireSlot, a local
// activity, in the workflow task that also upserts CaptchaPhase=queued; that upsert is committed only when the task
// completes. The semaphore may grant at once and run its holder check (CheckSlotHolders) before then, while the
// server still shows the task in phase delivering: the check must not take back the slot it just granted.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/activities"
)

// refreshAskProbe upserts delivering in a workflow task of its own (the delivery's), then does what the refresh's
// first workflow task does: upserts queued and runs a local activity, here the real holder check of its own slot.
// It checks once more after that workflow task completed, and returns how many times its slot was found ended.
func refreshAskProbe(ctx workflow.Context) ([]int, error) {
	upsert := func(p captchaflow.Phase) error {
		return workflow.UpsertTypedSearchAttributes(ctx, captchaflow.PhaseKey.ValueSet(string(p)))
	}
	self := []activities.SlotRequest{{WorkflowID: workflow.GetInfo(ctx).WorkflowExecution.ID, RunID: "r", Seq: 2}}
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 10 * time.Second})
	var dead []int
	check := func() error {
		var ended []activities.SlotRequest
		err := workflow.ExecuteLocalActivity(lctx, (&activities.Activities{}).CheckSlotHolders, self).Get(ctx, &ended)
		dead = append(dead, len(ended))
		return err
	}
	for _, step := range []func() error{
		func() error { return upsert(captchaflow.PhaseDelivering) },
		func() error { return workflow.Sleep(ctx, time.Millisecond) }, // the delivery's workflow task completes
		func() error { return upsert(captchaflow.PhaseQueued) },
		check, // the semaphore's check, landing while the asking workflow task is under way
		func() error { return workflow.Sleep(ctx, time.Millisecond) },
		check,
	} {
		if err := step(); err != nil {
			return dead, err
		}
	}
	return dead, nil
}

func TestE2E_RefreshAskKeepsItsFreshSlot(t *testing.T) {
	s := requireStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	queue := "refresh-ask-probe-" + s.runID
	w := worker.New(s.c, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(refreshAskProbe, workflow.RegisterOptions{Name: "RefreshAskProbe"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	run, err := s.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, "RefreshAskProbe")
	require.NoError(t, err)
	var dead []int
	require.NoError(t, run.Get(ctx, &dead))
	assert.Equal(t, []int{0, 0}, dead, "holder checks during the refresh's ask and after it: a slot found ended is "+
		"taken back while its task solves (the server still showed phase delivering)")
}
