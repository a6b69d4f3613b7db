package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/tests/devstack"
	"github.com/captchaflow/captchaflow/tests/simulator/sim"
)

// syncBuffer is an io.Writer safe for the run command's goroutines and the test reading it.
type syncBuffer struct {
	mu sync.Mutex
	sb strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sb.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sb.String()
}

// TestRunSmoke is `make run ARGS="-exit -tasks 10"` on free ports: the whole stack, a demo batch with every kind
// of injected trouble, and a summary that must say lost 0 with every task solved.
func TestRunSmoke(t *testing.T) {
	server, err := devstack.TemporalServerPath()
	require.NoError(t, err)
	if _, err := os.Stat(server); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("temporal-server missing at %s in CI (tools/build.sh should have built it): %v", server, err)
		}
		t.Skipf("temporal-server not built at %s; run `make tools` to run the smoke test", server)
	}

	// Known secrets (run reads them from the environment), so the logs can be searched for them below.
	const callbackSecret = "smoke-callback-secret-0123456789abcdef"
	const notifySecret = "smoke-notify-secret-0123456789abcdef"
	t.Setenv("CALLBACK_SECRET", callbackSecret)
	t.Setenv("NOTIFY_SECRET", notifySecret)
	t.Setenv("CAPTCHAAI_API_KEY", "") // the simulator, not the real provider
	t.Setenv("CAPTCHAAI_BASE_URL", "")

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dataDir := t.TempDir()
	var out syncBuffer
	code := run(ctx, []string{
		"-exit", "-tasks", "10", "-failover-tasks", "6", "-priced-tasks", "8", "-timeout", "3m", "-data", dataDir,
		"-port", "0", "-ui-port", "0", "-ingress-port", "0", "-simulator-port", "0", "-metrics-port", "0",
		"-codec-port", "0",
	}, &out)
	text := out.String()
	t.Log("\n" + text)
	if code != 0 {
		for _, name := range []string{"worker", "ingress", "simulator", "simulator-b", "temporal"} {
			t.Logf("--- %s.log ---\n%s", name, devstack.TailFile(filepath.Join(dataDir, "logs", name+".log"), 40))
		}
	}
	require.Equal(t, 0, code, "the run command must succeed")

	assert.Contains(t, text, "stack ready in")
	assert.Regexp(t, regexp.MustCompile(`lost\s+0 \(of 16 tasks the provider solved`), text)
	assert.Regexp(t, regexp.MustCompile(`failed\s+0\n`), text)
	assert.Regexp(t, regexp.MustCompile(`delivered\s+16 `), text)
	// Two providers: a runs dry after the first 2 of 6 plain tasks, the other 4 go to b at once; none paid twice.
	assert.Regexp(t, regexp.MustCompile(`solved by provider\s+a \(in\.php\) 12, b \(createTask, capsolver\) 4\n`), text)
	assert.Regexp(t, regexp.MustCompile(`failovers\s+4 of the 4 tasks started after a ran dry went to another provider \(4 on their first submission\)`), text)
	assert.Contains(t, text, "paid twice           0 (no task was created at two providers")
	// Issue #9's odd answers: every error-code pingback resubmitted at once, none taken as a result, and every
	// in.php refusal counted as a submission.
	planned := planBatch(10, "x", "http://127.0.0.1:9/hooks/captcha")
	counts := plannedFaults(t, planned, issue9Faults)
	refusals := 0
	for _, task := range planned {
		if spec, err := sim.ParseFaultSpec(task.Input.Params["sim_fault"]); err == nil && spec.SubmitError == sim.ErrorCaptchaUnsolvable {
			refusals += spec.FailSubmit
		}
	}
	require.Positive(t, counts["error-code pingback"])
	require.Positive(t, refusals)
	assert.Regexp(t, regexp.MustCompile(fmt.Sprintf(`error-code pingbacks %[1]d \(code=ERROR_CAPTCHA_UNSOLVABLE\): %[1]d taken as "resubmit", 0 as a result\n`,
		counts["error-code pingback"])), text)
	assert.Regexp(t, regexp.MustCompile(fmt.Sprintf(`in\.php refusals\s+%d counted as submissions`, refusals)), text)
	// Verdicts: a few solved tasks reported, each recorded once by the provider.
	assert.Regexp(t, regexp.MustCompile(fmt.Sprintf(`verdicts reported\s+%[1]d good, %[2]d bad; the provider recorded %[1]d good, %[2]d bad`,
		demoReportsGood, demoReportsBad)), text)
	assert.NotContains(t, text, "REPORT FAILED")
	assert.Regexp(t, regexp.MustCompile(`through Nexus\s+2 from namespace shop; of the 2 solved, 2 callers' results equal the task's own`), text)
	assert.Contains(t, text, "stopped; nothing is left running")

	// The priced batch: most of its tasks at the cheaper b, and what that saved against the file's order.
	priced := regexp.MustCompile(`priced batch \(routing: scored[^\n]*\n(?:  a\s+(\d+) tasks\n)?  b\s+(\d+) tasks\n  cost \$[0-9.]+; always a \(the file's order\) \$[0-9.]+; saved \$[0-9.]+ \((\d+)%\)\n`).FindStringSubmatch(text)
	require.NotNil(t, priced, "the priced batch's split")
	atA, _ := strconv.Atoi(cmp.Or(priced[1], "0"))
	atB, _ := strconv.Atoi(priced[2])
	assert.Equal(t, 8, atA+atB)
	assert.GreaterOrEqual(t, atB, 6, "most at the cheaper provider")

	assert.Contains(t, text, "--codec-endpoint http://127.0.0.1:", "payloads are encrypted by default, and the CLI told how to read them")
	keys, err := os.ReadFile(filepath.Join(dataDir, "keys"))
	require.NoError(t, err, "the first start makes a key")
	lines := strings.Split(strings.TrimSpace(string(keys)), "\n")
	_, key, _ := strings.Cut(lines[len(lines)-1], ":")
	require.NotEmpty(t, key)

	logs, err := filepath.Glob(filepath.Join(dataDir, "logs", "*.log"))
	require.NoError(t, err)
	require.Len(t, logs, 7) // the priced batch's worker and the Web UI too
	for _, path := range append(logs, "") {
		content := text
		if path != "" {
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			content = string(b)
		}
		for _, secret := range []string{callbackSecret, notifySecret, key} {
			assert.NotContains(t, content, secret, "a secret leaked into %s", cmp.Or(path, "the run's output"))
		}
	}
}
