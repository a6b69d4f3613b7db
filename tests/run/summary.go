package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/tests/devstack"
	"github.com/captchaflow/captchaflow/tests/devstack/downstream"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
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
	Nexus      nexusAudit
}

// ok is true when nothing was lost — the number the demo exists to show — and every task finished. An audit
// that could not be made means "lost: unknown", which is not zero.
func (s summary) ok() bool {
	return s.Audit != nil && len(s.Audit.Lost) == 0 && s.Total.Running == 0 && s.Total.NotStarted == 0 &&
		(s.Audit.Routing == nil || len(s.Audit.Routing.PaidTwice) == 0) && s.Nexus.Equal == s.Nexus.Solved
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
		writeRouting(w, s.Audit.Routing)
	}
	if s.Nexus.Called > 0 {
		fmt.Fprintf(w, "  through Nexus        %d from namespace %s; of the %d solved, %d callers' results equal the task's own\n",
			s.Nexus.Called, devstack.CallerNamespace, s.Nexus.Solved, s.Nexus.Equal)
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

// writeRouting shows the tasks per provider and what became of the tasks started after the first ran dry.
func writeRouting(w io.Writer, r *routingAudit) {
	if r == nil {
		return
	}
	var parts []string
	for _, p := range r.Providers {
		proto := "in.php"
		if p.Flavor != "" {
			proto = "createTask, " + p.Flavor
		}
		parts = append(parts, fmt.Sprintf("%s (%s) %d", p.Name, proto, r.ByProvider[p.Name]))
	}
	fmt.Fprintf(w, "  solved by provider   %s\n", strings.Join(parts, ", "))
	if r.After > 0 {
		fmt.Fprintf(w, "  failovers            %d of the %d tasks started after %s ran dry went to another provider (%d on their first submission)\n",
			r.AtOthers, r.After, r.Providers[0].Name, r.FirstSubmit)
	}
	if len(r.PaidTwice) == 0 {
		fmt.Fprintln(w, "  paid twice           0 (no task was created at two providers, by their own task lists)")
	} else {
		fmt.Fprintf(w, "  PAID TWICE           %d tasks created at two providers: %s\n", len(r.PaidTwice), strings.Join(r.PaidTwice, ", "))
	}
}
