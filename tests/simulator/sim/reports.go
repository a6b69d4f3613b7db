package sim

import (
	"encoding/json"
	"net/http"
	"time"
)

// Report verdicts as recorded.
const (
	VerdictGood = "good" // res.php action=reportgood
	VerdictBad  = "bad"  // res.php action=reportbad
)

// ReportRecord is one report request on a task, as the provider answered it.
type ReportRecord struct {
	Verdict string    `json:"verdict"`
	At      time.Time `json:"at"`
	// Answer is ReportRecorded for the task's first report, ErrorDuplicateReport for any later one.
	Answer string `json:"answer"`
	// Stalled: the answer was held back (ReportStall), so the client may never have read it.
	Stalled bool `json:"stalled,omitempty"`
}

// ReportStats counts report requests on known tasks: Good and Bad those recorded, Duplicate those refused as a
// task's second (or later) report.
type ReportStats struct {
	Good      int64 `json:"good"`
	Bad       int64 `json:"bad"`
	Duplicate int64 `json:"duplicate"`
}

// ReportStall is the PUT /_sim/report_stall document: the next Requests report requests on known tasks are
// recorded at once but answered only after StallMS (or when the simulator closes) — a provider whose answer is
// lost, e.g. to a worker killed mid-request.
type ReportStall struct {
	Requests int   `json:"requests"`
	StallMS  int64 `json:"stall_ms"`
}

// maxReportsKept bounds the report requests listed per task (a client looping on reports must not grow memory).
const maxReportsKept = 16

// maxReportStall bounds a stall.
const maxReportStall = 5 * time.Minute

// recordReport records a report on t: the first one counts, any later one (either verdict) is a duplicate, as on
// 2captcha. It returns the answer and how long to hold it back. Caller holds mu.
func (s *Simulator) recordReport(t *task, good bool, now time.Time) (reply, time.Duration) {
	verdict := VerdictBad
	if good {
		verdict = VerdictGood
	}
	rp := bareOKReply(ReportRecorded)
	switch {
	case t.reportsGood+t.reportsBad > 0:
		rp = errReply(ErrorDuplicateReport)
		s.stats.reports.Duplicate++
	case good:
		t.reportsGood++
		s.stats.reports.Good++
	default:
		t.reportsBad++
		s.stats.reports.Bad++
	}
	var stall time.Duration
	if s.reportStall.Requests > 0 {
		s.reportStall.Requests--
		stall = time.Duration(s.reportStall.StallMS) * time.Millisecond
	}
	if len(t.reports) < maxReportsKept {
		t.reports = append(t.reports, ReportRecord{Verdict: verdict, At: now, Answer: rp.value, Stalled: stall > 0})
	}
	return rp, stall
}

func (s *Simulator) handleReportStall(w http.ResponseWriter, r *http.Request) {
	var doc ReportStall
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil || doc.Requests < 0 || doc.StallMS < 0 ||
		time.Duration(doc.StallMS)*time.Millisecond > maxReportStall {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want {\"requests\": N >= 0, \"stall_ms\": 0..300000}"})
		return
	}
	s.mu.Lock()
	s.reportStall = doc
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, doc)
}
