package tests

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/proxy"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/captchaflow/captchaflow/codec"
)

// testKeysFile is a committed test key: encrypted histories replay with it (never a deployment's key).
const testKeysFile = "testdata/codec/test-keys"

// encryptedTestdataDir holds histories recorded encrypted under testKeysFile (make record-histories).
const encryptedTestdataDir = "testdata/encrypted"

// codecOptions are what codec.Configure gives every process with testKeysFile.
func codecOptions(t *testing.T) (client.Options, *codec.Codec) {
	var opts client.Options
	c, err := codec.Configure(&opts, testKeysFile, nil)
	require.NoError(t, err)
	return opts, c
}

// newCodecReplayer replays as a worker with CAPTCHAFLOW_KEYS_FILE set.
func newCodecReplayer(t *testing.T) worker.WorkflowReplayer {
	opts, _ := codecOptions(t)
	r, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{DataConverter: opts.DataConverter,
		FailureConverter: opts.FailureConverter})
	require.NoError(t, err)
	registerReplayed(r)
	return r
}

// encrypted is h with every payload encrypted by c, as a worker with the codec would have written it.
func encrypted(t *testing.T, h *historypb.History, c *codec.Codec) *historypb.History {
	out := cloneHistory(h)
	require.NoError(t, proxy.VisitPayloads(context.Background(), out, proxy.VisitPayloadsOptions{SkipSearchAttributes: true,
		Visitor: func(_ *proxy.VisitPayloadsContext, p []*commonpb.Payload) ([]*commonpb.Payload, error) {
			return c.Encode(p)
		}}))
	return out
}

func cloneHistory(h *historypb.History) *historypb.History {
	b, _ := protojson.Marshal(h)
	var out historypb.History
	_ = protojson.Unmarshal(b, &out)
	return &out
}

// TestReplayRecordedHistoriesEncrypted: the recorded (plaintext, pre-codec) histories replay on a worker with the
// codec, whose decoding passes unencrypted payloads through; the same histories with every payload encrypted
// replay with the key, hold no input in plaintext, and cannot run on a worker without the key.
func TestReplayRecordedHistoriesEncrypted(t *testing.T) {
	withCodec, plain := newCodecReplayer(t), newReplayer()
	_, c := codecOptions(t)
	for _, file := range recordedHistoryFiles(t) {
		t.Run(strings.TrimSuffix(strings.TrimPrefix(file, testdataDir+"/"), ".json"), func(t *testing.T) {
			f, err := os.Open(file)
			require.NoError(t, err)
			defer f.Close()
			h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
			require.NoError(t, err)
			require.NoError(t, replay(withCodec, h, ""), "a pre-codec history on a worker with the codec")
			enc := encrypted(t, h, c)
			require.NoError(t, replay(withCodec, enc, ""), "an encrypted history")
			raw, err := protojson.Marshal(enc)
			require.NoError(t, err)
			assert.NotContains(t, historyText(raw), `"pageurl"`, "the input is readable without the key")
			if len(h.GetEvents()) > 2 { // a started task decodes its input in its first workflow task
				assert.Error(t, replay(plain, enc, ""), "a worker without the key cannot run it")
			}
		})
	}
}

// TestReplayRecordedHistoriesWrittenEncrypted: histories an encrypting worker wrote, as the server stored them, replay with
// the key, hold no input or code in plaintext, and cannot run on a worker without the key.
func TestReplayRecordedHistoriesWrittenEncrypted(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(encryptedTestdataDir, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "record them with `make record-histories`")
	withCodec, plain := newCodecReplayer(t), newReplayer()
	for _, file := range files {
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		h, err := client.HistoryFromJSON(bytes.NewReader(b), client.HistoryJSONOptions{})
		require.NoError(t, err)
		assert.NoError(t, replay(withCodec, h, ""), file)
		assert.NoError(t, replay(withCodec, h, "00000000-0000-4000-8000-00000000reset"), "%s as a reset run", file)
		assert.Error(t, replay(plain, h, ""), "%s runs without the key", file)
		text := historyText(b)
		assert.NotContains(t, text, `"pageurl"`, file)
		assert.Contains(t, text, codec.EncodingEncrypted, file)
		assert.Empty(t, secretsIn(text), file)
	}
}
