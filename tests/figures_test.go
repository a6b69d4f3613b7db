package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// figuresDir receives the figures of the last run (gitignored), for the lead to quote.
const figuresDir = "out"

// figures are one scenario's numbers.
type figures struct {
	Scenario        string `json:"scenario"`
	Temporal        string `json:"temporal"`
	Tasks           int    `json:"tasks"`
	Delivered       int    `json:"delivered"`
	ViaCallback     int    `json:"via_callback"`
	ViaPoll         int    `json:"via_poll"`
	Submissions     int    `json:"provider_submissions"`
	PingbacksSent   int    `json:"pingbacks_sent"`
	PingbacksFailed int    `json:"pingbacks_failed"`
	// RepeatsAfterKill are activity attempts a worker SIGKILL lost after their side effect (at-least-once).
	RepeatsAfterKill int      `json:"repeats_after_kill"`
	WallSeconds      float64  `json:"wall_seconds"`
	Notes            []string `json:"notes,omitempty"`
}

func (f figures) line() string {
	return fmt.Sprintf("FIGURES %-28s tasks=%d delivered=%d via_callback=%d via_poll=%d submissions=%d pingbacks=%d(failed %d) repeats_after_kill=%d wall=%.1fs",
		f.Scenario, f.Tasks, f.Delivered, f.ViaCallback, f.ViaPoll, f.Submissions, f.PingbacksSent, f.PingbacksFailed,
		f.RepeatsAfterKill, f.WallSeconds)
}

var (
	figuresMu  sync.Mutex
	allFigures []figures
	runStarted = time.Now()
)

func recordFigures(t *testing.T, f figures) {
	t.Log(f.line())
	figuresMu.Lock()
	allFigures = append(allFigures, f)
	figuresMu.Unlock()
	if err := writeFigures(); err != nil {
		t.Logf("writing figures: %v", err)
	}
}

// figuresBase names the figures files after the server kind, so a cluster run does not overwrite the dev server's.
func figuresBase() string {
	if os.Getenv(envExternalAddress) != "" {
		return "e2e-figures-external"
	}
	return "e2e-figures"
}

// writeFigures writes out/e2e-figures[-external].json and .md (nothing when no scenario ran).
func writeFigures() error {
	figuresMu.Lock()
	defer figuresMu.Unlock()
	if len(allFigures) == 0 {
		return nil
	}
	if err := os.MkdirAll(figuresDir, 0o755); err != nil {
		return err
	}
	total := 0.0
	for _, f := range allFigures {
		total += f.WallSeconds
	}
	doc := struct {
		GeneratedAt     time.Time `json:"generated_at"`
		ElapsedSeconds  float64   `json:"elapsed_seconds"`
		ScenarioSeconds float64   `json:"scenario_seconds"`
		Scenarios       []figures `json:"scenarios"`
	}{time.Now().UTC(), time.Since(runStarted).Seconds(), total, allFigures}
	js, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(figuresDir, figuresBase()+".json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	var md strings.Builder
	fmt.Fprintf(&md, "# captchaflow e2e figures (%s)\n\n", doc.GeneratedAt.Format(time.RFC3339))
	md.WriteString("| scenario | Temporal | tasks | delivered | via callback | via poll | provider submissions | pingbacks (failed) | repeats after kill | wall |\n")
	md.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, f := range allFigures {
		fmt.Fprintf(&md, "| %s | %s | %d | %d | %d | %d | %d | %d (%d) | %d | %.1f s |\n", f.Scenario, f.Temporal, f.Tasks,
			f.Delivered, f.ViaCallback, f.ViaPoll, f.Submissions, f.PingbacksSent, f.PingbacksFailed, f.RepeatsAfterKill, f.WallSeconds)
	}
	fmt.Fprintf(&md, "\nScenario wall time %.1f s; whole test binary so far %.1f s.\n", total, doc.ElapsedSeconds)
	for _, f := range allFigures {
		for _, n := range f.Notes {
			fmt.Fprintf(&md, "\n- %s: %s", f.Scenario, n)
		}
	}
	md.WriteString("\n")
	return os.WriteFile(filepath.Join(figuresDir, figuresBase()+".md"), []byte(md.String()), 0o644)
}
