package tests

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
)

// A history a run made when its Submit's callback came before Submit's answer (the inbox case), after the
// provider-quirks marker: replayed under its own run ID it passes; a reset run replays the same events under its
// own run ID and must act as the run that recorded them did.
func TestReviewResetReplaysInboxCallback(t *testing.T) {
	f, err := os.Open("reviewdata/callback-before-submit-answer.json")
	require.NoError(t, err)
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	require.NoError(t, err)
	own := h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetOriginalExecutionRunId()
	require.NotEmpty(t, own)
	require.NoError(t, replay(newReplayer(), h, own), "replayed by the run that recorded it")
	require.NoError(t, replay(newReplayer(), h, "00000000-0000-4000-8000-00000000reset"), "replayed as a reset run")
}
