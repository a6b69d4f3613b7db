package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

func TestReportPlanPicksGoodThenBadInIDOrder(t *testing.T) {
	results := map[string]captchaflow.Result{}
	for i := 7; i >= 0; i-- {
		results[fmt.Sprintf("demo-x-%03d", i)] = captchaflow.Result{ProviderTaskID: fmt.Sprint(100 + i)}
	}
	plan := reportPlan(results)
	assert.Equal(t, map[string]captchaflow.Verdict{
		"demo-x-000": captchaflow.VerdictGood, "demo-x-001": captchaflow.VerdictGood, "demo-x-002": captchaflow.VerdictGood,
		"demo-x-003": captchaflow.VerdictBad, "demo-x-004": captchaflow.VerdictBad,
	}, plan)
	assert.Len(t, reportPlan(map[string]captchaflow.Result{"a": {}}), 1, "fewer solved tasks than planned reports")
}

func TestReportAuditCountsOnlyTheReportedProviderTasks(t *testing.T) {
	a := reportAudit{
		Sent:     map[captchaflow.Verdict]int{captchaflow.VerdictGood: 1, captchaflow.VerdictBad: 1},
		reported: map[string]captchaflow.Verdict{"101": captchaflow.VerdictGood, "102": captchaflow.VerdictBad},
		Failed:   []string{"demo-x-009 (bad): boom"},
	}
	a.countRecorded([]sim.Task{
		{ID: "101", ReportsGood: 1},
		{ID: "102", ReportsBad: 1},
		{ID: "103", ReportsBad: 1}, // not one of ours
	})
	var out strings.Builder
	writeReports(&out, a)
	assert.Equal(t, "  verdicts reported    1 good, 1 bad; the provider recorded 1 good, 1 bad (refunds claimed on the bad)\n"+
		"    REPORT FAILED: demo-x-009 (bad): boom\n", out.String())
}
