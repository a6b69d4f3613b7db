package sim

import (
	"fmt"
	"net/http"
	"time"
)

// answerFate is what happens to in.php's answer for one accepted submission.
type answerFate struct {
	lost          bool          // submit_lost: the connection closes without an answer
	stall         time.Duration // submit_stall_ms: the answer (or its loss) waits this long
	gatewayStatus int           // submit_gateway_error: a gateway's 5xx instead of the task id (when not lost)
}

// answerFateLocked decides what happens to in.php's answer for a submission just accepted with faults: whether it
// is held (submit_stall_ms), lost (submit_lost) or replaced by a gateway's 5xx (submit_gateway_error). They apply
// to the first submissions for the pingback URL (submit_lost=N: the first N; a stall or a gateway error alone: the
// first one), so a client's resubmission is answered. Caller holds mu.
func (s *Simulator) answerFateLocked(faults FaultSpec, pingbackURL string) answerFate {
	affected := max(faults.SubmitLost, min(faults.SubmitStallMS, 1), min(faults.SubmitGatewayStatus, 1))
	if affected == 0 {
		return answerFate{}
	}
	if s.answerSeen == nil {
		s.answerSeen = map[string]int{}
	}
	if s.answerSeen[pingbackURL] >= affected {
		return answerFate{}
	}
	s.answerSeen[pingbackURL]++
	fate := answerFate{lost: faults.SubmitLost > 0, stall: time.Duration(faults.SubmitStallMS) * time.Millisecond}
	if !fate.lost {
		fate.gatewayStatus = faults.SubmitGatewayStatus
	}
	if fate.lost {
		s.stats.answersLost++
	}
	if fate.stall > 0 {
		s.stats.answersStalled++
	}
	if fate.gatewayStatus != 0 {
		s.stats.answersGatewayError++
	}
	return fate
}

// holdAnswer applies an accepted submission's answer faults before the answer is written: it waits out a stall
// (until the client hangs up or the simulator closes, whichever is first) and, for a lost answer, aborts the
// response, so the connection closes with no answer at all — the task exists and will be solved and called back,
// but the client never learns its id. It does not return for a lost answer.
func (s *Simulator) holdAnswer(r *http.Request, rp reply) {
	if rp.fate.stall > 0 {
		timer := time.NewTimer(rp.fate.stall)
		select {
		case <-timer.C:
		case <-r.Context().Done():
		case <-s.ctx.Done():
		}
		timer.Stop()
	}
	if rp.fate.lost {
		s.log.Debug("in.php answer lost", "task_id", rp.value)
		panic(http.ErrAbortHandler) // net/http closes the connection without a response and logs nothing
	}
}

// gatewayPage is what a proxy in front of the provider answers with its 5xx: HTML, not an in.php answer.
const gatewayPage = "<html><head><title>%d %s</title></head><body><h1>%d %s</h1><p>simulated gateway</p></body></html>\n"

// writeGatewayError answers an accepted submission with a gateway's 5xx (submit_gateway_error) instead of its task
// id, and reports whether it did.
func writeGatewayError(w http.ResponseWriter, rp reply) bool {
	status := rp.fate.gatewayStatus
	if status == 0 {
		return false
	}
	text := http.StatusText(status)
	if text == "" {
		text = "Origin Error"
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = fmt.Fprintf(w, gatewayPage, status, text, status, text)
	return true
}
