// Package billing counts a workflow's Temporal Cloud billable actions from its event history, for the benchmarks'
// figures and the end-to-end tests that check a path's cost does not grow.
package billing

import (
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
)

// ChangeVersionAttribute is the search attribute the Go SDK's GetVersion upserts; Temporal Cloud does not bill it.
const ChangeVersionAttribute = "TemporalChangeVersion"

// Actions are one workflow's Temporal Cloud billable actions as its event history shows them, per
// https://docs.temporal.io/cloud/actions (the history mapping of each action type):
//
//   - Workflow started: WORKFLOW_EXECUTION_STARTED (search attributes given at start are free).
//   - Activity: each ACTIVITY_TASK_SCHEDULED, and each retry: ACTIVITY_TASK_STARTED.attempt − 1 (intermediate
//     attempts write no event; the started event is written with the last attempt's number).
//   - Local activities and markers: all RecordMarker commands of one workflow task are one action (GetVersion and
//     SideEffect markers included), plus WORKFLOW_TASK_COMPLETED.metering_metadata.nonfirst_local_activity_execution_attempts.
//   - Timer started, signal received (WORKFLOW_EXECUTION_SIGNALED, whoever sent it), search attribute upsert (one
//     per command, however many attributes; one that sets only TemporalChangeVersion is free), update accepted,
//     workflow options updated, reset (WORKFLOW_TASK_FAILED with cause RESET_WORKFLOW), Nexus operation scheduled or
//     cancel requested: one each.
//   - Child workflow: START_CHILD_WORKFLOW_EXECUTION_INITIATED is two (the intent and the start).
//
// Not in any history, so not counted here: activity heartbeats that reach the server, queries, rejected updates
// (the server's action metric has those), and the retries of an activity still backing off when the workflow
// closed (its started event is never written). A signal sent to another workflow is billed in the signalled
// workflow's history, as the Cloud UI shows it.
type Actions struct {
	WorkflowStarted      int `json:"workflow_started"`
	ActivitiesScheduled  int `json:"activities_scheduled"`
	ActivityRetries      int `json:"activity_retries"`
	MarkerTasks          int `json:"marker_workflow_tasks,omitempty"`
	LocalActivityRetries int `json:"local_activity_retries,omitempty"`
	Timers               int `json:"timers"`
	Signals              int `json:"signals"`
	Upserts              int `json:"search_attribute_upserts"`
	ChildWorkflows       int `json:"child_workflow_actions,omitempty"`
	Other                int `json:"other,omitempty"` // updates, options updates, resets, Nexus operations
	Total                int `json:"total"`
}

// Count counts the billable actions in one workflow's history.
func Count(events []*historypb.HistoryEvent) Actions {
	var a Actions
	markerTasks := map[int64]bool{}
	for _, e := range events {
		switch e.GetEventType() {
		case enums.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			a.WorkflowStarted++
		case enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			a.ActivitiesScheduled++
		case enums.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			a.ActivityRetries += max(int(e.GetActivityTaskStartedEventAttributes().GetAttempt())-1, 0)
		case enums.EVENT_TYPE_MARKER_RECORDED:
			markerTasks[e.GetMarkerRecordedEventAttributes().GetWorkflowTaskCompletedEventId()] = true
		case enums.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			a.LocalActivityRetries += int(e.GetWorkflowTaskCompletedEventAttributes().GetMeteringMetadata().GetNonfirstLocalActivityExecutionAttempts())
		case enums.EVENT_TYPE_TIMER_STARTED:
			a.Timers++
		case enums.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			a.Signals++
		case enums.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			if billableUpsert(e) {
				a.Upserts++
			}
		case enums.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
			a.ChildWorkflows += 2
		case enums.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
			enums.EVENT_TYPE_WORKFLOW_EXECUTION_OPTIONS_UPDATED,
			enums.EVENT_TYPE_NEXUS_OPERATION_SCHEDULED,
			enums.EVENT_TYPE_NEXUS_OPERATION_CANCEL_REQUESTED:
			a.Other++
		case enums.EVENT_TYPE_WORKFLOW_TASK_FAILED:
			if e.GetWorkflowTaskFailedEventAttributes().GetCause() == enums.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW {
				a.Other++
			}
		}
	}
	a.MarkerTasks = len(markerTasks)
	a.Total = a.WorkflowStarted + a.ActivitiesScheduled + a.ActivityRetries + a.MarkerTasks + a.LocalActivityRetries +
		a.Timers + a.Signals + a.Upserts + a.ChildWorkflows + a.Other
	return a
}

// billableUpsert: an upsert that sets anything besides TemporalChangeVersion.
func billableUpsert(e *historypb.HistoryEvent) bool {
	fields := e.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes().GetIndexedFields()
	for name := range fields {
		if name != ChangeVersionAttribute {
			return true
		}
	}
	return len(fields) == 0 // an empty upsert is still a command the server meters
}
