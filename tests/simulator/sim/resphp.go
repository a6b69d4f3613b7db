package sim

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// handleRes serves res.php: get (one id, or 2captcha's ids list), getbalance, reportgood, reportbad.
func (s *Simulator) handleRes(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		errReplyf(ErrorBadParameters, "The request could not be parsed.").write(w, wantsJSON(r))
		return
	}
	s.result(r).write(w, wantsJSON(r))
}

func (s *Simulator) result(r *http.Request) reply {
	action := r.Form.Get("action")
	s.countResCall(action)
	key := r.Form.Get("key")
	if rp, ok := s.checkKey(key); !ok {
		return rp
	}
	id := r.Form.Get("id")
	switch action {
	case "get":
		if ids := r.Form.Get("ids"); id == "" && ids != "" {
			return s.getMany(key, ids)
		}
		return s.get(key, id)
	case "getbalance":
		return bareOKReply(strconv.FormatFloat(s.Balance(), 'f', 3, 64))
	case "reportgood", "reportbad":
		return s.report(key, id, action == "reportgood")
	default:
		return errReplyf(ErrorBadParameters, "Unknown action.")
	}
}

func (s *Simulator) countResCall(action string) {
	switch action {
	case "get", "getbalance", "reportgood", "reportbad":
	default:
		action = "other" // keep the map bounded whatever clients send
	}
	s.mu.Lock()
	s.stats.resCalls[action]++
	s.mu.Unlock()
}

func (s *Simulator) get(key, id string) reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.lookup(key, id)
	if t == nil {
		return errReply(ErrorWrongCaptchaID)
	}
	t.resGets++
	switch s.statusAt(t, time.Now()) {
	case StatusSolving:
		return errReply(CaptchaNotReady)
	case StatusSolved:
		rp := okReply(t.code())
		rp.userAgent = t.answerAgent() // res.php's JSON answer carries it; an ids= answer drops it (getMany)
		return rp
	case StatusUnsolvable:
		return errReply(t.failWord())
	default: // expired: the result is gone, as on the real service
		return errReply(ErrorWrongCaptchaID)
	}
}

// getMany answers 2captcha's action=get&ids=a,b,c in one request: each ID's answer in order, joined by "|", a
// solution without its "OK|" and any other answer as its word (ERROR_WRONG_CAPTCHA_ID for an unknown ID).
func (s *Simulator) getMany(key, ids string) reply {
	var parts []string
	for id := range strings.SplitSeq(ids, ",") {
		parts = append(parts, s.get(key, strings.TrimSpace(id)).value)
	}
	return bareOKReply(strings.Join(parts, "|"))
}

func (s *Simulator) report(key, id string, good bool) reply {
	s.mu.Lock()
	now := time.Now()
	t := s.lookup(key, id)
	if t == nil || s.statusAt(t, now) == StatusExpired {
		s.mu.Unlock()
		return errReply(ErrorWrongCaptchaID)
	}
	rp, stall := s.recordReport(t, good, now)
	s.mu.Unlock()
	s.sleep(stall) // recorded, but the answer is held back (PUT /_sim/report_stall)
	return rp
}
