package createtask

import (
	"sync"
	"time"
)

// syncTTL bounds how long a code that came with createTask's answer is kept for Get: CapSolver's results are gone 5
// minutes after creation (Profile.Poll.Window), and a task polls long before that.
const syncTTL = 5 * time.Minute

// syncMax bounds the codes kept, oldest dropped first.
const syncMax = 1024

// syncCache keeps codes that came with createTask's answer, so that Submit + Get (the in.php client's shape) still
// returns them. It is per process: a Get on another worker asks getTaskResult. The Submit activity hands such a
// code to the workflow in its result (SubmitSolved), so a poll needs the cache only from a workflow that did not take it.
type syncCache struct {
	mu    sync.Mutex
	codes map[string]syncEntry
	order []string
}

type syncEntry struct {
	code string
	at   time.Time
}

func (s *syncCache) put(id, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.codes == nil {
		s.codes = map[string]syncEntry{}
	}
	if _, ok := s.codes[id]; !ok {
		s.order = append(s.order, id)
	}
	s.codes[id] = syncEntry{code: code, at: time.Now()}
	for len(s.order) > syncMax {
		delete(s.codes, s.order[0])
		s.order = s.order[1:]
	}
}

func (s *syncCache) get(id string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.codes[id]
	if !ok || time.Since(e.at) > syncTTL {
		return "", false
	}
	return e.code, true
}
