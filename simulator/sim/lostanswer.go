package sim

import (
	"net/http"
	"time"
)

// answerFateLocked decides what happens to in.php's answer for a submission just accepted with faults: whether it
// is held (submit_stall_ms) and whether it is lost (submit_lost). Both apply to the first submissions for the
// pingback URL (submit_lost=N: the first N; a stall alone: the first one), so a client's resubmission is answered.
// Caller holds mu.
func (s *Simulator) answerFateLocked(faults FaultSpec, pingbackURL string) (lost bool, stall time.Duration) {
	affected := max(faults.SubmitLost, min(faults.SubmitStallMS, 1))
	if affected == 0 {
		return false, 0
	}
	if s.answerSeen == nil {
		s.answerSeen = map[string]int{}
	}
	if s.answerSeen[pingbackURL] >= affected {
		return false, 0
	}
	s.answerSeen[pingbackURL]++
	lost = faults.SubmitLost > 0
	stall = time.Duration(faults.SubmitStallMS) * time.Millisecond
	if lost {
		s.stats.answersLost++
	}
	if stall > 0 {
		s.stats.answersStalled++
	}
	return lost, stall
}

// holdAnswer applies an accepted submission's answer faults before the answer is written: it waits out a stall
// (until the client hangs up or the simulator closes, whichever is first) and, for a lost answer, aborts the
// response, so the connection closes with no answer at all — the task exists and will be solved and called back,
// but the client never learns its id. It does not return for a lost answer.
func (s *Simulator) holdAnswer(r *http.Request, rp reply) {
	if rp.stall > 0 {
		timer := time.NewTimer(rp.stall)
		select {
		case <-timer.C:
		case <-r.Context().Done():
		case <-s.ctx.Done():
		}
		timer.Stop()
	}
	if rp.lost {
		s.log.Debug("in.php answer lost", "task_id", rp.value)
		panic(http.ErrAbortHandler) // net/http closes the connection without a response and logs nothing
	}
}
