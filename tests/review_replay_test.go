package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
)

// Histories written by the code at commit 1b6073a (before the issue-14 rework) on paths tests/testdata does not
// cover, recorded against a dev server with stub activities (no secret in them). Each must replay on the new code.
//
// v1-grant-before-acquire-completed: PROVIDER_THREADS, the semaphore's grant is recorded before the AcquireSlot
// activity's completion. The old acquireSlot started its deadline timer after the activity, found the grant and
// cancelled the timer (TimerStarted, TimerCanceled); the new askSlot routes the grant during the activity and skips
// the timer, so replay meets ActivityTaskScheduled(Submit) where the history has TimerStarted.
//
// v1-lost-wait-took-earlier-submission-callback: max_submits=3, submissions A and B called back unsolvable, the
// third's in.php answer lost (await-callback-of-lost-submission v1), then a repeated pingback of A: the old code took
// it (ID != previous) and completed; the new table files it under submission 1 as stale, so the recorded
// TimerCanceled meets a timer still running.
//
// v1-zero-balance-lost-zero-balance: zero balance, a lost in.php answer (v1 wait), zero balance again, accepted. The
// old code kept status.Waiting through the lost wait, so the second pause upserted nothing; the new submitFailed
// clears Waiting on the lost answer, the second pause counts as a first one and upserts CaptchaPhase where the
// history has the pause's TimerStarted.
//
// control-v1-grant-after-acquire-completed replays (the grant arrives after the AcquireSlot completion).
func TestReviewReplayOldHistories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata-review", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	replayer := newReplayer()
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".json"), func(t *testing.T) {
			f, err := os.Open(file)
			require.NoError(t, err)
			defer f.Close()
			h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
			require.NoError(t, err)
			require.NoError(t, replay(replayer, h))
		})
	}
}
