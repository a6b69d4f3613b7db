package sim_test

import (
	"math"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

func getBalance(h *harness) string {
	return h.call("/res.php", url.Values{"key": {testKey}, "action": {"getbalance"}})
}

func TestBalanceZeroRefusesSubmissionsUntilItIsSetAgain(t *testing.T) {
	cfg := testConfig()
	cfg.Balance = 5
	h := startSim(t, cfg)
	assert.Equal(t, "5.000", getBalance(h))

	var doc sim.BalanceDoc
	putJSON(t, h.srv.URL+"/_sim/balance", `{"balance":0}`, http.StatusOK, &doc)
	assert.Equal(t, sim.BalanceDoc{Balance: 0}, doc)
	assert.Equal(t, "0.000", getBalance(h))
	assert.Equal(t, sim.ErrorZeroBalance, h.call("/in.php", recaptchaParams("", nil)))
	putJSON(t, h.srv.URL+"/_sim/balance", `{"balance":-1.5}`, http.StatusOK, nil)
	assert.Equal(t, sim.ErrorZeroBalance, h.call("/in.php", recaptchaParams("", nil)), "a negative balance refuses too")
	st := h.stats()
	assert.EqualValues(t, 2, st.Submissions.RejectedByCode[sim.ErrorZeroBalance])
	assert.Empty(t, allTasks(h), "no task is created while the balance is zero")

	h.sim.Reset()
	assert.Equal(t, "-1.500", getBalance(h), "reset keeps the balance")
	putJSON(t, h.srv.URL+"/_sim/balance", `{"balance":12.25}`, http.StatusOK, nil)
	h.getJSON("/_sim/balance", &doc)
	assert.Equal(t, 12.25, doc.Balance)
	assert.True(t, strings.HasPrefix(h.call("/in.php", recaptchaParams("", nil)), "OK|"))
}

func TestBalanceDocumentIsValidated(t *testing.T) {
	h := startSim(t, testConfig())
	putJSON(t, h.srv.URL+"/_sim/balance", `{"balance":"x"}`, http.StatusBadRequest, nil)
	putJSON(t, h.srv.URL+"/_sim/balance", `{"credit":1}`, http.StatusBadRequest, nil)
	require.Error(t, h.sim.SetBalance(math.Inf(1)))
}
