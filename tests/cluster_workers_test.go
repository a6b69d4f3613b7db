package tests

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/captchaflow/captchaflow"
)

// TestE2E_Core_WorkersListed: on the local server and on the cluster the worker's SDK heartbeats reach the
// server, so ListWorkers (what the Web UI's Workers page and `temporal worker list` read) shows this run's worker
// process polling its queue. The worker heartbeats at start, then every 10 s.
func TestE2E_Core_WorkersListed(t *testing.T) {
	s := requireStack(t)
	pid := strconv.Itoa(s.worker.PID())
	eventually(t, "ListWorkers shows worker pid "+pid, 20*time.Second, 500*time.Millisecond, func() string {
		resp, err := s.c.WorkflowService().ListWorkers(context.Background(),
			&workflowservice.ListWorkersRequest{Namespace: s.namespace})
		if err != nil {
			return err.Error()
		}
		var seen []string
		for _, w := range resp.GetWorkers() {
			if w.GetProcessId() == pid && w.GetTaskQueue() == captchaflow.DefaultTaskQueue &&
				w.GetStatus() == enumspb.WORKER_STATUS_RUNNING {
				t.Logf("listed: %s %s on %s, %s %s", w.GetWorkerIdentity(), w.GetStatus(), w.GetTaskQueue(),
					w.GetSdkName(), w.GetSdkVersion())
				return ""
			}
			seen = append(seen, fmt.Sprintf("%s pid %s %s on %s", w.GetWorkerIdentity(), w.GetProcessId(), w.GetStatus(), w.GetTaskQueue()))
		}
		return fmt.Sprintf("listed %v", seen)
	})
}
