package main

import (
	"go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	"github.com/captchaflow/captchaflow/tests/internal/billing"
)

// changeVersionAttribute is billing.ChangeVersionAttribute (free in Temporal Cloud).
const changeVersionAttribute = billing.ChangeVersionAttribute

// Actions are one workflow's billable actions (billing.Actions).
type Actions = billing.Actions

// countActions counts the billable actions in one workflow's history.
func countActions(events []*historypb.HistoryEvent) Actions { return billing.Count(events) }

// activityAttempts is how many attempts each activity type took in the history (scheduled + retries), by type.
func activityAttempts(events []*historypb.HistoryEvent) map[string]int {
	types := map[int64]string{}
	out := map[string]int{}
	for _, e := range events {
		switch e.GetEventType() {
		case enums.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			name := e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
			types[e.GetEventId()] = name
			out[name]++
		case enums.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			at := e.GetActivityTaskStartedEventAttributes()
			out[types[at.GetScheduledEventId()]] += max(int(at.GetAttempt())-1, 0)
		}
	}
	return out
}
