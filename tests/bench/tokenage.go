package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/captchaflow/captchaflow"
)

// Token age at delivery on the poll path, for the defaults (issue #10 §3): a task whose pingback is lost is
// recovered by the first res.php poll after the callback timeout (120 s by default), so the token it delivers
// was solved long before captchaflow received it, and expires_at (received + lifetime) overstates its life by
// that much. The tasks run with callback_timeout_seconds and poll_interval_seconds unset (the contract's
// defaults, or the worker's CALLBACK_TIMEOUT_BY_METHOD given with -worker-env), the pingback dropped, solved
// after each of tokenAgeSolves; their age is measured from the provider's solve (the simulator's solved_at) to
// the moment the caller holds the result.
var tokenAgeSolves = []time.Duration{5 * time.Second, 30 * time.Second}

// tokenAgeMethods are the methods measured, with in.php parameters the simulator accepts.
var tokenAgeMethods = map[string]captchaflow.Params{
	"userrecaptcha": {"googlekey": "6Le-bench-key", "pageurl": "https://bench.example/login"},
	"turnstile":     {"sitekey": "0x4AAAAAAABench", "pageurl": "https://bench.example/login"},
}

// TokenAgeResult is one poll-path task's token age at delivery.
type TokenAgeResult struct {
	Method     string  `json:"method"`
	SolveS     float64 `json:"solve_s"`
	LifetimeS  float64 `json:"lifetime_s"`
	Via        string  `json:"via,omitempty"`
	ToResultS  float64 `json:"submit_to_result_s"`
	AgeS       float64 `json:"age_at_delivery_s"`          // provider's solve → the caller holds the result
	LeftS      float64 `json:"life_left_s"`                // lifetime − age: what the token really has left
	ClaimedS   float64 `json:"expires_at_left_s"`          // expires_at − delivery: what the Result says it has left
	OverstateS float64 `json:"expires_at_overstatement_s"` // ClaimedS − LeftS
	Err        string  `json:"error,omitempty"`
}

// tokenAge runs one dropped-pingback task per method and solve time, all at once (about 2 minutes with the
// defaults), and writes token-age.json and token-age.md to -out.
func (b *bench) tokenAge(ctx context.Context) []TokenAgeResult {
	var (
		mu  sync.Mutex
		out []TokenAgeResult
		wg  sync.WaitGroup
	)
	for method, params := range tokenAgeMethods {
		for _, solve := range tokenAgeSolves {
			wg.Go(func() {
				r := b.tokenAgeTask(ctx, method, params, solve)
				mu.Lock()
				out = append(out, r)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	sortTokenAge(out)
	if err := writeTokenAge(b.cfg.out, out); err != nil {
		log.Printf("token age: writing: %v", err)
	}
	return out
}

func (b *bench) tokenAgeTask(ctx context.Context, method string, params captchaflow.Params, solve time.Duration) TokenAgeResult {
	r := TokenAgeResult{Method: method, SolveS: solve.Seconds(), LifetimeS: captchaflow.TokenLifetimes[method].Seconds()}
	p := captchaflow.Params{"sim_fault": "drop_pingback", "sim_solve_ms": strconv.FormatInt(solve.Milliseconds(), 10)}
	for k, v := range params {
		p[k] = v
	}
	id := fmt.Sprintf("bench-%s-tokenage-%s-%d", b.runID, method, solve.Milliseconds())
	tctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	start := time.Now()
	res, err := captchaflow.Solve(tctx, b.c, id, captchaflow.Input{Method: method, Params: p},
		captchaflow.StartOptions{TaskQueue: b.taskQueue})
	delivered := time.Now()
	r.ToResultS = round2(delivered.Sub(start).Seconds())
	if err != nil {
		r.Err = err.Error()
		return r
	}
	r.Via = string(res.Via)
	tasks, err := b.sim.tasksByWorkflow(ctx, id)
	ts := tasks[id]
	if err != nil || len(ts) == 0 || ts[len(ts)-1].SolvedAt == nil {
		r.Err = fmt.Sprintf("simulator: no solved task (%v)", err)
		return r
	}
	age := delivered.Sub(*ts[len(ts)-1].SolvedAt)
	r.AgeS = round2(age.Seconds())
	r.LeftS = round2(r.LifetimeS - age.Seconds())
	r.ClaimedS = round2(res.ExpiresAt.Sub(delivered).Seconds())
	r.OverstateS = round2(r.ClaimedS - r.LeftS)
	log.Printf("token age, poll path, %s solved in %s: %s via %s after %.1fs, age at delivery %.1fs, %.1fs left (expires_at says %.1fs)",
		method, solve, res.Code[:min(8, len(res.Code))], r.Via, r.ToResultS, r.AgeS, r.LeftS, r.ClaimedS)
	return r
}

func sortTokenAge(rs []TokenAgeResult) {
	for i := 1; i < len(rs); i++ {
		for j := i; j > 0 && (rs[j].Method < rs[j-1].Method || rs[j].Method == rs[j-1].Method && rs[j].SolveS < rs[j-1].SolveS); j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
}

// renderTokenAge is the Markdown table of the token ages.
func renderTokenAge(rs []TokenAgeResult) string {
	var sb strings.Builder
	sb.WriteString("Token age at delivery, poll path (pingback lost), callback_timeout_seconds and poll_interval_seconds " +
		"unset (the contract's 120 s / 5 s unless -worker-env CALLBACK_TIMEOUT_BY_METHOD=… sets the worker's)\n\n")
	sb.WriteString("| method | lifetime, s | provider solve, s | submit → result, s | age at delivery, s | life left, s | expires_at says left, s |\n")
	sb.WriteString("| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range rs {
		if r.Err != "" {
			fmt.Fprintf(&sb, "| %s | %.0f | %.0f | error: %s | | | |\n", r.Method, r.LifetimeS, r.SolveS, r.Err)
			continue
		}
		fmt.Fprintf(&sb, "| %s | %.0f | %.0f | %.1f | %.1f | %.1f | %.1f |\n",
			r.Method, r.LifetimeS, r.SolveS, r.ToResultS, r.AgeS, r.LeftS, r.ClaimedS)
	}
	return sb.String()
}

func writeTokenAge(dir string, rs []TokenAgeResult) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(rs, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "token-age.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	md := renderTokenAge(rs)
	fmt.Print("\n" + md)
	return os.WriteFile(filepath.Join(dir, "token-age.md"), []byte(md), 0o644)
}
