package main

import (
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
)

// hist builds a synthetic history: ids are assigned in order from 1.
type hist []*historypb.HistoryEvent

func (h *hist) add(t enums.EventType, attrs ...func(*historypb.HistoryEvent)) int64 {
	e := &historypb.HistoryEvent{EventId: int64(len(*h) + 1), EventType: t}
	for _, f := range attrs {
		f(e)
	}
	*h = append(*h, e)
	return e.EventId
}

func (h *hist) wft() int64 {
	h.add(enums.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED)
	h.add(enums.EVENT_TYPE_WORKFLOW_TASK_STARTED)
	return h.add(enums.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)
}

func (h *hist) activity(name string, attempt int32) {
	sched := h.add(enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{
			ActivityType: &commonpb.ActivityType{Name: name}}}
	})
	h.add(enums.EVENT_TYPE_ACTIVITY_TASK_STARTED, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{
			ScheduledEventId: sched, Attempt: attempt}}
	})
	h.add(enums.EVENT_TYPE_ACTIVITY_TASK_COMPLETED)
}

func (h *hist) upsert(names ...string) {
	fields := map[string]*commonpb.Payload{}
	for _, n := range names {
		fields[n] = &commonpb.Payload{Data: []byte(`"x"`)}
	}
	h.add(enums.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_UpsertWorkflowSearchAttributesEventAttributes{UpsertWorkflowSearchAttributesEventAttributes: &historypb.UpsertWorkflowSearchAttributesEventAttributes{
			SearchAttributes: &commonpb.SearchAttributes{IndexedFields: fields}}}
	})
}

func (h *hist) marker(wftCompleted int64) {
	h.add(enums.EVENT_TYPE_MARKER_RECORDED, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_MarkerRecordedEventAttributes{MarkerRecordedEventAttributes: &historypb.MarkerRecordedEventAttributes{
			MarkerName: "Version", WorkflowTaskCompletedEventId: wftCompleted}}
	})
}

// The callback path's shape: start, submit, upsert while waiting, timer, the pingback's signal, completion.
func TestCountActionsCallbackPath(t *testing.T) {
	var h hist
	h.add(enums.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED)
	h.wft()
	h.activity("Submit", 1)
	h.wft()
	h.upsert("CaptchaPhase", "CaptchaTaskId") // two attributes, one command: one action
	h.add(enums.EVENT_TYPE_TIMER_STARTED)
	h.add(enums.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED)
	h.wft()
	h.add(enums.EVENT_TYPE_TIMER_CANCELED)
	h.add(enums.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED)

	got := countActions(h)
	want := Actions{WorkflowStarted: 1, ActivitiesScheduled: 1, Timers: 1, Signals: 1, Upserts: 1, Total: 5}
	if got != want {
		t.Fatalf("countActions = %+v, want %+v", got, want)
	}
}

// A poll that took 7 attempts is one scheduled activity and 6 retries; a submit retried twice after busy answers adds 2.
func TestCountActionsActivityRetriesAndAttemptsByType(t *testing.T) {
	var h hist
	h.add(enums.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED)
	h.wft()
	h.activity("Submit", 3)
	h.wft()
	h.add(enums.EVENT_TYPE_TIMER_STARTED)
	h.add(enums.EVENT_TYPE_TIMER_FIRED)
	h.wft()
	h.activity("Poll", 7)
	h.wft()
	h.add(enums.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED)

	got := countActions(h)
	if got.ActivitiesScheduled != 2 || got.ActivityRetries != 8 || got.Total != 1+2+8+1 {
		t.Fatalf("countActions = %+v, want 2 scheduled, 8 retries, total 12", got)
	}
	attempts := activityAttempts(h)
	if attempts["Submit"] != 3 || attempts["Poll"] != 7 || len(attempts) != 2 {
		t.Fatalf("activityAttempts = %v, want Submit 3, Poll 7", attempts)
	}
}

// Markers of one workflow task are one action; an upsert of TemporalChangeVersion alone is free; a child workflow is
// two; local activity retries come from the workflow task's metering metadata; a reset is one.
func TestCountActionsMarkersUpsertsChildrenLocalActivitiesResets(t *testing.T) {
	var h hist
	h.add(enums.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED)
	first := h.wft()
	h.marker(first)
	h.marker(first)
	h.upsert(changeVersionAttribute)
	second := h.add(enums.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_WorkflowTaskCompletedEventAttributes{WorkflowTaskCompletedEventAttributes: &historypb.WorkflowTaskCompletedEventAttributes{
			MeteringMetadata: &commonpb.MeteringMetadata{NonfirstLocalActivityExecutionAttempts: 2}}}
	})
	h.marker(second)
	h.upsert(changeVersionAttribute, "CaptchaPhase")
	h.add(enums.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED)
	h.add(enums.EVENT_TYPE_WORKFLOW_TASK_FAILED, func(e *historypb.HistoryEvent) {
		e.Attributes = &historypb.HistoryEvent_WorkflowTaskFailedEventAttributes{WorkflowTaskFailedEventAttributes: &historypb.WorkflowTaskFailedEventAttributes{
			Cause: enums.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW}}
	})
	h.add(enums.EVENT_TYPE_WORKFLOW_TASK_FAILED) // an ordinary failed task is not billed

	got := countActions(h)
	want := Actions{WorkflowStarted: 1, MarkerTasks: 2, LocalActivityRetries: 2, Upserts: 1, ChildWorkflows: 2, Other: 1, Total: 9}
	if got != want {
		t.Fatalf("countActions = %+v, want %+v", got, want)
	}
}

func TestCountActionsEmptyHistory(t *testing.T) {
	if got := countActions(nil); got != (Actions{}) {
		t.Fatalf("countActions(nil) = %+v, want zero", got)
	}
}

func TestParseActionSample(t *testing.T) {
	for _, c := range []struct {
		line, key string
		v         int64
		ok        bool
	}{
		{`action{action_type="grpc_RecordActivityTaskHeartbeat",namespace="default",service_name="frontend"} 3`, "grpc_RecordActivityTaskHeartbeat", 3, true},
		{`action{action_type="command_StartTimer",service_name="history"} 7`, "", 0, false},
		{`action{namespace="default"} 2e+00`, `namespace="default"`, 2, true},
		{`action_total{action_type="x"} 1`, "", 0, false},
		{`# TYPE action counter`, "", 0, false},
	} {
		key, v, ok := parseActionSample(c.line)
		if key != c.key || v != c.v || ok != c.ok {
			t.Errorf("parseActionSample(%q) = %q, %d, %v; want %q, %d, %v", c.line, key, v, ok, c.key, c.v, c.ok)
		}
	}
}

func TestThreadsTargets(t *testing.T) {
	r := &Results{Threads: &ThreadsResult{Tasks: 24, Threads: 4, SolveMS: 2000, ProviderThreads: "unset",
		IdealSeconds: 12, WallSeconds: 30, WallToIdeal: 2.5, NoSlot: 60, NoSlotPerTask: 2.5}}
	ts := threadsTargets(r)
	if len(ts) != 2 || ts[0].Met || ts[1].Met || !ts[0].Measured {
		t.Fatalf("missed targets reported as %+v", ts)
	}
	r.Threads.NoSlotPerTask, r.Threads.WallToIdeal = 0.5, 1.5
	if ts = threadsTargets(r); !ts[0].Met || !ts[1].Met {
		t.Fatalf("met targets reported as %+v", ts)
	}
	if threadsTargets(&Results{}) != nil {
		t.Fatal("targets without the phase")
	}
}
