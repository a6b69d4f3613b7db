package sim

import (
	"encoding/json"
	"net/http"
	"strings"
)

// routes wires the provider protocol and the /_sim control API.
func (s *Simulator) routes() http.Handler {
	mux := http.NewServeMux()
	if s.cfg.Protocol == ProtocolCreateTask {
		s.createTaskRoutes(mux)
	} else {
		mux.HandleFunc("GET /in.php", s.handleIn)
		mux.HandleFunc("POST /in.php", s.handleIn)
		mux.HandleFunc("GET /res.php", s.limitRes(s.handleRes))
		mux.HandleFunc("POST /res.php", s.limitRes(s.handleRes))
	}

	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /_sim/stats", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Stats())
	})
	mux.HandleFunc("GET /_sim/tasks", s.handleTasks)
	mux.HandleFunc("POST /_sim/reset", func(w http.ResponseWriter, _ *http.Request) {
		s.Reset()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /_sim/rules", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, FaultRuleList{Rules: nonNil(s.FaultRules())})
	})
	mux.HandleFunc("PUT /_sim/rules", s.handleSetRules)
	mux.HandleFunc("PUT /_sim/report_stall", s.handleReportStall)
	mux.HandleFunc("GET /_sim/threads", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, ThreadLimit{Threads: s.Threads()})
	})
	mux.HandleFunc("PUT /_sim/threads", s.handleSetThreads)
	mux.HandleFunc("GET /_sim/balance", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, BalanceDoc{Balance: s.Balance()})
	})
	mux.HandleFunc("PUT /_sim/balance", s.handleSetBalance)
	mux.HandleFunc("GET /_sim/limits", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, s.Limits())
	})
	mux.HandleFunc("PUT /_sim/limits", s.handleSetLimits)
	return mux
}

// FaultRuleList is the GET/PUT /_sim/rules document.
type FaultRuleList struct {
	Rules []FaultRule `json:"rules"`
}

// handleTasks lists tasks; ?pingback_path=/callback/wf-1 keeps only tasks
// whose pingback path equals it, ?pingback_path_prefix=/callback/chaos- those
// starting with it.
func (s *Simulator) handleTasks(w http.ResponseWriter, r *http.Request) {
	exact := r.URL.Query().Get("pingback_path")
	prefix := r.URL.Query().Get("pingback_path_prefix")
	tasks := s.Tasks()
	if exact != "" || prefix != "" {
		kept := tasks[:0]
		for _, t := range tasks {
			if (exact == "" || t.PingbackPath == exact) && strings.HasPrefix(t.PingbackPath, prefix) {
				kept = append(kept, t)
			}
		}
		tasks = kept
	}
	writeJSON(w, http.StatusOK, TaskList{Tasks: tasks})
}

func (s *Simulator) handleSetRules(w http.ResponseWriter, r *http.Request) {
	var doc FaultRuleList
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid rules document: " + err.Error()})
		return
	}
	if err := s.SetFaultRules(doc.Rules); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, FaultRuleList{Rules: nonNil(s.FaultRules())})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
