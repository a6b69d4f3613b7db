package main

import (
	"cmp"
	"context"
	"fmt"
	"log"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
)

// slowestShown is how many of the slowest callback → result tasks per side get their timeline in the results.
const slowestShown = 3

// slowest lists the tasks with the longest callback → result (or start → result), each with its history as
// offsets from the callback, so a tail can be explained (which step waited).
func (b *bench) slowest(ctx context.Context, runs []taskRun, callbackAt func(string) (time.Time, bool), byStart bool) []SlowTask {
	type cand struct {
		r  taskRun
		at time.Time
	}
	var cs []cand
	for _, r := range runs {
		if r.Err != nil {
			continue
		}
		at, ok := callbackAt(r.ID)
		if !ok && !byStart {
			continue
		}
		cs = append(cs, cand{r, at})
	}
	slices.SortFunc(cs, func(x, y cand) int {
		if byStart {
			return cmp.Compare(y.r.End.Sub(y.r.Start), x.r.End.Sub(x.r.Start))
		}
		return cmp.Compare(y.r.End.Sub(y.at), x.r.End.Sub(x.at))
	})
	var out []SlowTask
	for _, c := range cs[:min(slowestShown, len(cs))] {
		origin := c.at
		if origin.IsZero() { // no callback: offsets from the start request
			origin = c.r.Start
		}
		st := SlowTask{WorkflowID: c.r.ID, StartToResult: round2(ms(c.r.End.Sub(c.r.Start)))}
		if !c.at.IsZero() {
			st.CallbackToResult = round2(ms(c.r.End.Sub(c.at)))
		}
		events, err := b.history(ctx, c.r.ID)
		if err != nil {
			continue
		}
		c.at = origin
		st.Timeline = append(st.Timeline, fmt.Sprintf("%+.0f ms start request sent", ms(c.r.Start.Sub(c.at))))
		for _, e := range events {
			st.Timeline = append(st.Timeline, fmt.Sprintf("%+.0f ms %s", ms(e.At.Sub(c.at)), strings.TrimPrefix(e.Type.String(), "EVENT_TYPE_")))
		}
		st.Timeline = append(st.Timeline, fmt.Sprintf("%+.0f ms result in the caller's hands", ms(c.r.End.Sub(c.at))))
		out = append(out, st)
	}
	return out
}

func sampleIDs(runs []taskRun, n int) []string {
	var out []string
	step := max(len(runs)/n, 1)
	for i := 0; i < len(runs) && len(out) < n; i += step {
		if runs[i].Err == nil {
			out = append(out, runs[i].ID)
		}
	}
	return out
}

// historyStats counts the history events of each workflow.
func (b *bench) historyStats(ctx context.Context, wfIDs []string) HistoryStats {
	hs := HistoryStats{Counts: map[string]int{}}
	sum := 0
	for _, id := range wfIDs {
		events, err := b.history(ctx, id)
		if err != nil {
			log.Printf("history of %s: %v", id, err)
			continue
		}
		n := len(events)
		if _, ok := eventTime(events, enums.EVENT_TYPE_TIMER_STARTED); ok {
			hs.WithTimer++
		}
		if hs.Sampled == 0 || n < hs.Min {
			hs.Min = n
		}
		hs.Max = max(hs.Max, n)
		hs.Sampled++
		sum += n
		hs.Counts[strconv.Itoa(n)]++
	}
	if hs.Sampled > 0 {
		hs.Mean = round2(float64(sum) / float64(hs.Sampled))
	}
	return hs
}

// history returns the event types and times of a closed workflow.
func (b *bench) history(ctx context.Context, id string) ([]historyEvent, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	it := b.c.GetWorkflowHistory(ctx, id, "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var out []historyEvent
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, err
		}
		out = append(out, historyEvent{Type: e.GetEventType(), At: e.GetEventTime().AsTime()})
	}
	return out, nil
}

type historyEvent struct {
	Type enums.EventType
	At   time.Time
}

func eventTime(events []historyEvent, t enums.EventType) (time.Time, bool) {
	for _, e := range events {
		if e.Type == t {
			return e.At, true
		}
	}
	return time.Time{}, false
}
