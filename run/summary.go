package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/devstack/downstream"
	"github.com/captchaflow/captchaflow/simulator/sim"
)

// summary is everything the closing report shows.
type summary struct {
	Elapsed    time.Duration
	Total      tally
	ByScenario map[string]tally
	Failures   []string
	Receiver   downstream.Stats
	// Audit is nil when it could not be made (no simulator, or its task list was unreachable).
	Audit      *audit
	AuditError string
}

// ok is true when nothing was lost — the number the demo exists to show — and every task finished. An audit
// that could not be made means "lost: unknown", which is not zero.
func (s summary) ok() bool {
	return s.Audit != nil && len(s.Audit.Lost) == 0 && s.Total.Running == 0 && s.Total.NotStarted == 0
}

func writeSummary(w io.Writer, s summary) {
	fmt.Fprintf(w, "\ncaptchaflow demo: %d tasks in %s\n\n", s.Total.Total, s.Elapsed.Round(time.Second))

	const row = "  %-24s %5v %13v %9v %12v %7v\n"
	fmt.Fprintf(w, row, "trouble injected", "tasks", "via callback", "via poll", "resubmitted", "failed")
	for _, name := range scenarioOrder() {
		if c, ok := s.ByScenario[name]; ok {
			fmt.Fprintf(w, row, name, c.Total, c.Callback, c.Poll, c.Resubmitted, c.Failed)
		}
	}

	fmt.Fprintln(w)
	fmt.Fprintf(w, "  solved via callback  %d\n", s.Total.Callback)
	fmt.Fprintf(w, "  solved via poll      %d\n", s.Total.Poll)
	fmt.Fprintf(w, "  resubmitted          %d\n", s.Total.Resubmitted)
	fmt.Fprintf(w, "  failed               %d\n", s.Total.Failed)
	if s.Audit != nil {
		writeResubmits(w, s.Audit.Resubmits)
		writeReports(w, s.Audit.Reports)
	}
	if s.Total.Running > 0 {
		fmt.Fprintf(w, "  still running        %d (the demo's time ran out)\n", s.Total.Running)
	}
	if s.Total.NotStarted > 0 {
		fmt.Fprintf(w, "  not started          %d\n", s.Total.NotStarted)
	}
	fmt.Fprintf(w, "  delivered            %d (signature verified; %d duplicate deliveries answered and ignored)\n",
		s.Receiver.Accepted, s.Receiver.Duplicates)
	if s.Receiver.Rejected > 0 || s.Receiver.Conflicts > 0 {
		fmt.Fprintf(w, "  REJECTED deliveries  %d bad signature, %d with a conflicting code\n", s.Receiver.Rejected, s.Receiver.Conflicts)
	}
	switch {
	case s.Audit == nil:
		fmt.Fprintf(w, "  lost                 unknown: %s\n", s.AuditError)
	case len(s.Audit.Lost) == 0:
		fmt.Fprintf(w, "  lost                 0 (of %d tasks the provider solved, every code reached the receiver)\n", s.Audit.Solved)
	default:
		fmt.Fprintf(w, "  LOST                 %d of %d tasks the provider solved: %s\n",
			len(s.Audit.Lost), s.Audit.Solved, strings.Join(s.Audit.Lost, ", "))
	}
	for _, f := range s.Failures {
		fmt.Fprintf(w, "    failed: %s\n", f)
	}
}

// writeResubmits says what became of the "unsolvable" answers that did not come from res.php: error-code pingbacks
// (taken as "resubmit", never as a result) and in.php refusals (counted as submissions).
func writeResubmits(w io.Writer, r resubmitAudit) {
	fmt.Fprintf(w, "  error-code pingbacks %d (code=%s): %d taken as \"resubmit\", %d as a result\n",
		r.ErrorPingbacks, sim.ErrorCaptchaUnsolvable, r.TakenAsResubmit, len(r.TakenAsResult))
	if len(r.TakenAsResult) > 0 {
		fmt.Fprintf(w, "    TAKEN AS A RESULT: %s\n", strings.Join(r.TakenAsResult, ", "))
	}
	if len(r.Neither) > 0 {
		fmt.Fprintf(w, "    not resubmitted on the pingback's word: %s\n", strings.Join(r.Neither, ", "))
	}
	fmt.Fprintf(w, "  in.php refusals      %d counted as submissions (answered %s; busy answers are retried, not counted)\n",
		r.RefusalsCounted, sim.ErrorCaptchaUnsolvable)
}

// writeReports says which verdicts were sent and which the provider recorded (what a refund is claimed on).
func writeReports(w io.Writer, r reportAudit) {
	good, bad := captchaflow.VerdictGood, captchaflow.VerdictBad
	fmt.Fprintf(w, "  verdicts reported    %d good, %d bad; the provider recorded %d good, %d bad (refunds claimed on the bad)\n",
		r.Sent[good], r.Sent[bad], r.Recorded[good], r.Recorded[bad])
	for _, f := range r.Failed {
		fmt.Fprintf(w, "    REPORT FAILED: %s\n", f)
	}
}
