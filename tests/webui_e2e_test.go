package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow"
	"github.com/captchaflow/captchaflow/tests/devstack"
)

// chromiumForTest returns Debian's chromium, skipping the test when it is missing, except in CI (.ci/run
// installs it), where a missing browser is a broken pipeline.
func chromiumForTest(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("chromium missing in CI (.ci/run installs it): %v", err)
		}
		t.Skip("chromium not installed (apt-get install chromium); the Web UI test needs it")
	}
	return path
}

// renderedPage is the DOM of url after headless Chromium ran the Web UI's scripts (with time for its API calls).
func renderedPage(ctx context.Context, chromium, url string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--user-data-dir="+os.TempDir()+"/captchaflow-chromium-"+strconv.Itoa(os.Getpid()),
		"--virtual-time-budget=15000", "--dump-dom", url)
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("chromium %s: %w", url, err)
	}
	return string(out), nil
}

// missingFrom names the wanted strings the page lacks ("" when it has them all).
func missingFrom(page string, want ...string) string {
	var missing []string
	for _, w := range want {
		if !strings.Contains(page, w) {
			missing = append(missing, w)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return fmt.Sprintf("missing %q from the page (%d bytes)", missing, len(page))
}

// TestE2E_WebUIShowsWorkersAndTask opens the Web UI of a running stack (the one make run starts) in headless
// Chromium: the Workers page lists the worker and its task queue, and a solved task's page shows its timeline,
// its input and its result, and its Search Attributes tab CaptchaPhase done.
func TestE2E_WebUIShowsWorkersAndTask(t *testing.T) {
	chromium := chromiumForTest(t)
	server, err := devstack.TemporalServerPath()
	require.NoError(t, err)
	if _, err := os.Stat(server); err != nil && os.Getenv("CI") == "" {
		t.Skipf("e2e: temporal-server missing at %s", server)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	stack, err := devstack.Start(ctx, devstack.Options{RunDir: t.TempDir(),
		SimulatorEnv: map[string]string{"SIM_SOLVE_MIN": "200ms", "SIM_SOLVE_MAX": "400ms"}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = stack.Stop() })
	c, err := stack.Dial(ctx)
	require.NoError(t, err)
	defer c.Close()

	id := "webui-" + strconv.FormatInt(time.Now().UnixMilli()%1e7, 36)
	run, err := captchaflow.Start(ctx, c, id, captchaflow.Input{Method: "userrecaptcha",
		Params: captchaflow.Params{"googlekey": "6Le-webui-site-key", "pageurl": "https://shop.example.test/login"}})
	require.NoError(t, err)
	var res captchaflow.Result
	require.NoError(t, run.Get(ctx, &res))

	ui := stack.Temporal.UIURL() + "/namespaces/" + devstack.DefaultNamespace
	workerID := fmt.Sprintf("%d@", stack.Worker().PID()) // the SDK's identity: pid@host
	var page string
	// The last rendering is kept for whoever reads a failure.
	t.Cleanup(func() {
		if t.Failed() {
			file := filepath.Join(os.TempDir(), "captchaflow-webui-last-page.html")
			t.Logf("the last rendered page is in %s (%v)", file, os.WriteFile(file, []byte(page), 0o644))
		}
	})
	eventually(t, "the Workers page lists the worker", 90*time.Second, 2*time.Second, func() string {
		if page, err = renderedPage(ctx, chromium, ui+"/workers"); err != nil {
			return err.Error()
		}
		return missingFrom(page, workerID, captchaflow.DefaultTaskQueue)
	})
	t.Logf("Workers page: lists %s… on task queue %s", workerID, captchaflow.DefaultTaskQueue)

	task := ui + "/workflows/" + id + "/" + run.GetRunID()
	eventually(t, "the task's page shows its timeline, input and result", 60*time.Second, 2*time.Second, func() string {
		if page, err = renderedPage(ctx, chromium, task+"/history"); err != nil {
			return err.Error()
		}
		return missingFrom(page, "Timeline", "Input", "6Le-webui-site-key", "Result", res.Code)
	})
	t.Logf("task page: timeline, input (googlekey 6Le-webui-site-key) and result (code %s)", res.Code)
	// The same page's Search Attributes tab.
	eventually(t, "the task's search attributes show CaptchaPhase", 60*time.Second, 2*time.Second, func() string {
		if page, err = renderedPage(ctx, chromium, task+"/search-attributes"); err != nil {
			return err.Error()
		}
		return missingFrom(page, captchaflow.PhaseKey.GetName(), string(captchaflow.PhaseDone), captchaflow.TaskIDKey.GetName(), id)
	})
	t.Logf("task page, Search Attributes tab: %s %s, %s %s", captchaflow.PhaseKey.GetName(), captchaflow.PhaseDone, captchaflow.TaskIDKey.GetName(), id)
}
