package tests

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/proxy"
	"go.temporal.io/sdk/converter"

	"github.com/captchaflow/captchaflow"
)

func (s *stack) history(ctx context.Context, id string) (*historypb.History, error) {
	return s.runHistory(ctx, id, "")
}

// runHistory is the history of run runID of id ("": the current run), decrypted.
func (s *stack) runHistory(ctx context.Context, id, runID string) (*historypb.History, error) {
	h, err := s.storedRunHistory(ctx, id, runID)
	if err != nil {
		return nil, err
	}
	return h, s.decoded(ctx, h)
}

// storedRunHistory is the history as the server stores it: payloads encrypted.
func (s *stack) storedRunHistory(ctx context.Context, id, runID string) (*historypb.History, error) {
	iter := s.c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for iter.HasNext() {
		ev, err := iter.Next()
		if err != nil {
			return nil, err
		}
		h.Events = append(h.Events, ev)
	}
	return h, nil
}

// decoded decrypts h's payloads in place with the suite's key, so tests read histories as the Web UI with the
// codec shows them.
func (s *stack) decoded(ctx context.Context, h *historypb.History) error {
	if s.codec == nil {
		return nil
	}
	return proxy.VisitPayloads(ctx, h, proxy.VisitPayloadsOptions{SkipSearchAttributes: true,
		Visitor: func(_ *proxy.VisitPayloadsContext, p []*commonpb.Payload) ([]*commonpb.Payload, error) {
			return s.codec.Decode(p)
		}})
}

// lostAttempts counts, per activity type, the attempts a worker crash lost: for each activity whose recorded
// start is a retry after a timeout, attempt-1 earlier attempts may have done their side effect.
func lostAttempts(h *historypb.History) map[string]int {
	types := map[int64]string{}
	lost := map[string]int{}
	for _, ev := range h.GetEvents() {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			types[ev.GetEventId()] = a.GetActivityType().GetName()
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && a.GetAttempt() > 1 &&
			a.GetLastFailure().GetTimeoutFailureInfo() != nil {
			lost[types[a.GetScheduledEventId()]] += int(a.GetAttempt()) - 1
		}
	}
	return lost
}

// activityAttempts is the highest recorded attempt of each activity type.
func activityAttempts(h *historypb.History) map[string]int32 {
	types := map[int64]string{}
	out := map[string]int32{}
	for _, ev := range h.GetEvents() {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			types[ev.GetEventId()] = a.GetActivityType().GetName()
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
			name := types[a.GetScheduledEventId()]
			out[name] = max(out[name], a.GetAttempt())
		}
	}
	return out
}

// untokenedDeliveries are the untokened callbacks that reached the workflow, in order: the unauthenticated callback
// signals (with their code: a workflow without the untokened update's handler) and the accepted UntokenedUpdates
// (their provider task ID only, Code empty).
func untokenedDeliveries(t *testing.T, h *historypb.History) []captchaflow.Callback {
	var out []captchaflow.Callback
	dc := converter.GetDefaultDataConverter()
	for _, ev := range h.GetEvents() {
		if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil && a.GetSignalName() == captchaflow.CallbackSignal {
			var cb captchaflow.Callback
			require.NoError(t, dc.FromPayloads(a.GetInput(), &cb))
			if !cb.Authenticated {
				out = append(out, cb)
			}
		}
		in := ev.GetWorkflowExecutionUpdateAcceptedEventAttributes().GetAcceptedRequest().GetInput()
		if in.GetName() == captchaflow.UntokenedUpdate {
			var hint captchaflow.UntokenedHint
			require.NoError(t, dc.FromPayloads(in.GetArgs(), &hint))
			out = append(out, captchaflow.Callback{ProviderTaskID: hint.ProviderTaskID})
		}
	}
	return out
}

// signals are the callbacks the workflow received, in order.
func signals(t *testing.T, h *historypb.History) []captchaflow.Callback {
	var out []captchaflow.Callback
	dc := converter.GetDefaultDataConverter()
	for _, ev := range h.GetEvents() {
		a := ev.GetWorkflowExecutionSignaledEventAttributes()
		if a == nil || a.GetSignalName() != captchaflow.CallbackSignal {
			continue
		}
		var cb captchaflow.Callback
		require.NoError(t, dc.FromPayloads(a.GetInput(), &cb))
		out = append(out, cb)
	}
	return out
}
