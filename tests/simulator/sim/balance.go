package sim

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
)

// BalanceDoc is the GET / PUT /_sim/balance document: the account balance res.php?action=getbalance reports. While
// it is <= 0 every in.php request is refused with ERROR_ZERO_BALANCE (2captcha's meaning: no money on the account),
// before the thread cap is looked at; setting it above 0 again lets submissions through. It starts at SIM_BALANCE,
// is shared by every key, is not spent by submissions, and survives /_sim/reset (like the thread cap).
type BalanceDoc struct {
	Balance float64 `json:"balance"`
}

// SetBalance changes the account balance at run time.
func (s *Simulator) SetBalance(b float64) error {
	if math.IsNaN(b) || math.IsInf(b, 0) {
		return fmt.Errorf("balance must be a finite number, got %v", b)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.balance = b
	return nil
}

// Balance returns the account balance.
func (s *Simulator) Balance() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.balance
}

func (s *Simulator) handleSetBalance(w http.ResponseWriter, r *http.Request) {
	var doc BalanceDoc
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid balance document: " + err.Error()})
		return
	}
	if err := s.SetBalance(doc.Balance); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, BalanceDoc{Balance: s.Balance()})
}
