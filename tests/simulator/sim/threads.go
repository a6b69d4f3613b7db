package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// ThreadStats is the thread cap's part of /_sim/stats. CaptchaAI sells concurrent threads: a key may have at most
// Limit tasks being solved at once, and an in.php request beyond it is refused (Config.BusyCode), not queued. A
// thread frees when its task is solved or found unsolvable.
type ThreadStats struct {
	// Limit is the cap per key; 0 means unlimited.
	Limit int `json:"limit"`
	// InUse is the number of tasks being solved now, over every key.
	InUse int `json:"in_use"`
	// PeakInUse is the most tasks one key had being solved at once since the last reset or cap change.
	PeakInUse int `json:"peak_in_use"`
	// NoSlot counts in.php requests refused because the key's threads were all busy (also counted in
	// submissions.rejected_by_code under the busy code; injected fail_submit answers are not counted here).
	NoSlot int64 `json:"no_slot"`
}

// ThreadLimit is the GET / PUT /_sim/threads document.
type ThreadLimit struct {
	Threads int `json:"threads"`
}

// threadState is the cap and its counters; guarded by Simulator.mu.
type threadState struct {
	limit  int
	busy   map[string]int // tasks in solving, per key
	peak   int
	noSlot int64
}

func newThreadState(limit int) threadState {
	return threadState{limit: limit, busy: map[string]int{}}
}

// reset forgets the busy counts and the counters, keeping the cap.
func (ts *threadState) reset() { *ts = newThreadState(ts.limit) }

// take claims a thread for key, or reports false when all of its threads are busy (and counts the refusal).
func (ts *threadState) take(key string) bool {
	if ts.limit > 0 && ts.busy[key] >= ts.limit {
		ts.noSlot++
		return false
	}
	ts.busy[key]++
	ts.peak = max(ts.peak, ts.busy[key])
	return true
}

// release frees one of key's threads.
func (ts *threadState) release(key string) {
	if ts.busy[key] > 1 {
		ts.busy[key]--
	} else {
		delete(ts.busy, key)
	}
}

func (ts *threadState) stats() ThreadStats {
	inUse := 0
	for _, n := range ts.busy {
		inUse += n
	}
	return ThreadStats{Limit: ts.limit, InUse: inUse, PeakInUse: ts.peak, NoSlot: ts.noSlot}
}

// SetThreads changes the cap per key at run time (0 = unlimited) and restarts the peak count. Tasks already being
// solved keep their threads; a key over a lowered cap is refused until enough of them finish.
func (s *Simulator) SetThreads(n int) error {
	if n < 0 {
		return fmt.Errorf("threads must be >= 0, got %d", n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.threads.limit = n
	s.threads.peak = 0
	for _, b := range s.threads.busy {
		s.threads.peak = max(s.threads.peak, b)
	}
	return nil
}

// Threads returns the cap per key (0 = unlimited).
func (s *Simulator) Threads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.threads.limit
}

func (s *Simulator) handleSetThreads(w http.ResponseWriter, r *http.Request) {
	var doc ThreadLimit
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid threads document: " + err.Error()})
		return
	}
	if err := s.SetThreads(doc.Threads); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, ThreadLimit{Threads: s.Threads()})
}
