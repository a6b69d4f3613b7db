package sim_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

// The simulator records every report per task (/_sim/tasks) and in all (/_sim/stats): a task's first report is
// recorded, any later one, of either verdict, is answered ERROR_DUPLICATE_REPORT, as on 2captcha.
func TestReportsRecordedPerTask(t *testing.T) {
	h := startSim(t, testConfig())
	a := h.submit("", nil)
	b := h.submit("", nil)
	report := func(action, id string) string {
		return h.call("/res.php", url.Values{"key": {testKey}, "action": {action}, "id": {id}})
	}

	assert.Equal(t, sim.ReportRecorded, report("reportbad", a))
	assert.Equal(t, sim.ErrorDuplicateReport, report("reportbad", a), "the same verdict again")
	assert.Equal(t, sim.ErrorDuplicateReport, report("reportgood", a), "the other verdict")
	assert.Equal(t, sim.ReportRecorded, report("reportgood", b))
	assert.Equal(t, sim.ErrorWrongCaptchaID, report("reportgood", "1"), "an unknown task")

	ta := h.task(a)
	assert.EqualValues(t, 1, ta.ReportsBad)
	assert.EqualValues(t, 0, ta.ReportsGood)
	require.Len(t, ta.Reports, 3)
	assert.Equal(t, []string{sim.VerdictBad, sim.VerdictBad, sim.VerdictGood},
		[]string{ta.Reports[0].Verdict, ta.Reports[1].Verdict, ta.Reports[2].Verdict})
	assert.Equal(t, []string{sim.ReportRecorded, sim.ErrorDuplicateReport, sim.ErrorDuplicateReport},
		[]string{ta.Reports[0].Answer, ta.Reports[1].Answer, ta.Reports[2].Answer})
	assert.False(t, ta.Reports[0].At.IsZero())

	tb := h.task(b)
	assert.EqualValues(t, 1, tb.ReportsGood)
	require.Len(t, tb.Reports, 1)

	assert.Equal(t, sim.ReportStats{Good: 1, Bad: 1, Duplicate: 2}, h.stats().Reports)
}

// The list of a task's report requests is bounded.
func TestReportsListBounded(t *testing.T) {
	h := startSim(t, testConfig())
	id := h.submit("", nil)
	for range 40 {
		h.call("/res.php", url.Values{"key": {testKey}, "action": {"reportbad"}, "id": {id}})
	}
	task := h.task(id)
	assert.EqualValues(t, 1, task.ReportsBad)
	assert.LessOrEqual(t, len(task.Reports), 16)
	assert.EqualValues(t, 39, h.stats().Reports.Duplicate)
}

// A stalled report is recorded at once and answered late; the client's retry is then a duplicate.
func TestReportStall(t *testing.T) {
	h := startSim(t, testConfig())
	id := h.submit("", nil)
	put := func(body string) int {
		req, err := http.NewRequest(http.MethodPut, h.srv.URL+"/_sim/report_stall", strings.NewReader(body))
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusBadRequest, put(`{"requests":1,"stall_ms":-1}`))
	assert.Equal(t, http.StatusBadRequest, put(`{"requests":1,"stall_ms":1000000}`))
	require.Equal(t, http.StatusOK, put(`{"requests":1,"stall_ms":300}`))

	started := time.Now()
	assert.Equal(t, sim.ReportRecorded, h.call("/res.php", url.Values{"key": {testKey}, "action": {"reportbad"}, "id": {id}}))
	assert.GreaterOrEqual(t, time.Since(started), 300*time.Millisecond)
	started = time.Now()
	assert.Equal(t, sim.ErrorDuplicateReport, h.call("/res.php", url.Values{"key": {testKey}, "action": {"reportbad"}, "id": {id}}))
	assert.Less(t, time.Since(started), 300*time.Millisecond, "only the next request was stalled")

	task := h.task(id)
	assert.EqualValues(t, 1, task.ReportsBad)
	require.Len(t, task.Reports, 2)
	assert.True(t, task.Reports[0].Stalled)
	assert.False(t, task.Reports[1].Stalled)
}
