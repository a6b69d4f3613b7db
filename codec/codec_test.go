package codec

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
)

// writeKeys writes a keys file of the given lines and loads it.
func writeKeys(t testing.TB, lines ...string) *Codec {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600))
	c, err := Load(path)
	require.NoError(t, err)
	return c
}

func TestRoundTripHidesThePlaintext(t *testing.T) {
	dc := DataConverter(writeKeys(t, "# a comment\n", NewKeyLine("k1")))
	p, err := dc.ToPayload(map[string]string{"code": "03AGdBq2-the-solved-token"})
	require.NoError(t, err)
	assert.Equal(t, EncodingEncrypted, string(p.Metadata[converter.MetadataEncoding]))
	assert.Equal(t, "k1", string(p.Metadata[MetadataKeyID]))
	assert.NotContains(t, string(p.Data), "the-solved-token")
	var back map[string]string
	require.NoError(t, dc.FromPayload(p, &back))
	assert.Equal(t, "03AGdBq2-the-solved-token", back["code"])
}

func TestRotationOlderKeysStillDecrypt(t *testing.T) {
	old, next := NewKeyLine("2026-01"), NewKeyLine("2026-02")
	p, err := DataConverter(writeKeys(t, old)).ToPayload("started under the old key")
	require.NoError(t, err)
	rotated := writeKeys(t, next, old) // the new key first: it encrypts, the old one still decrypts
	var s string
	require.NoError(t, DataConverter(rotated).FromPayload(p, &s))
	assert.Equal(t, "started under the old key", s)
	q, err := DataConverter(rotated).ToPayload("x")
	require.NoError(t, err)
	assert.Equal(t, "2026-02", string(q.Metadata[MetadataKeyID]))
}

func TestUnknownKeyAndTamperingFailWithoutLeaking(t *testing.T) {
	line := NewKeyLine("k1")
	p, err := DataConverter(writeKeys(t, line)).ToPayload("secret-code")
	require.NoError(t, err)
	_, err = writeKeys(t, NewKeyLine("k2")).Decode([]*commonpb.Payload{p})
	require.ErrorContains(t, err, `"k1"`)
	assert.ErrorContains(t, err, KeysFileEnv)
	tampered := &commonpb.Payload{Metadata: p.Metadata, Data: append([]byte(nil), p.Data...)}
	tampered.Data[len(tampered.Data)-1] ^= 1
	_, err = writeKeys(t, line).Decode([]*commonpb.Payload{tampered})
	require.ErrorContains(t, err, "does not decrypt")
	assert.NotContains(t, err.Error(), strings.TrimSpace(strings.SplitN(line, ":", 2)[1]))
}

func TestPlaintextPayloadsPassThrough(t *testing.T) {
	p, err := converter.GetDefaultDataConverter().ToPayload("written before the codec")
	require.NoError(t, err)
	var s string
	require.NoError(t, DataConverter(writeKeys(t, NewKeyLine("k1"))).FromPayload(p, &s))
	assert.Equal(t, "written before the codec", s)
}

func TestLoadRefusesBadFilesWithoutQuotingKeys(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{"empty": "# nothing\n", "short": "k1:c2hvcnQ=\n",
		"dup": NewKeyLine("k1") + NewKeyLine("k1"), "noid": ":" + strings.SplitN(NewKeyLine("x"), ":", 2)[1]} {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		_, err := Load(path)
		require.Error(t, err, name)
		assert.NotContains(t, err.Error(), "c2hvcnQ=", name)
	}
}

func TestConfigureEncryptsFailureMessagesOnlyWithKeys(t *testing.T) {
	var opts client.Options
	var logged strings.Builder
	c, err := Configure(&opts, "", slog.New(slog.NewTextHandler(&logged, nil)))
	require.NoError(t, err)
	assert.Nil(t, c)
	assert.Contains(t, logged.String(), "plaintext", "a process without a key says so")
	assert.Nil(t, opts.DataConverter, "no key: the SDK's defaults, as before")
	path := filepath.Join(t.TempDir(), "keys")
	require.NoError(t, os.WriteFile(path, []byte(NewKeyLine("k1")), 0o600))
	_, err = Configure(&opts, path, nil)
	require.NoError(t, err)
	f := opts.FailureConverter.ErrorToFailure(temporal.NewApplicationError("code 03AG-secret was refused", "Bad"))
	assert.NotContains(t, f.String(), "03AG-secret")
	assert.Contains(t, opts.FailureConverter.FailureToError(f).Error(), "03AG-secret")
}

func TestDecryptOnlyWritesPlaintextAndReadsCiphertext(t *testing.T) {
	line := NewKeyLine("k1")
	p, err := DataConverter(writeKeys(t, line)).ToPayload("encrypted earlier")
	require.NoError(t, err)
	only := writeKeys(t, "-\n", line) // the first step of switching on, or the way back off
	assert.Empty(t, only.CurrentKeyID())
	var s string
	require.NoError(t, DataConverter(only).FromPayload(p, &s))
	assert.Equal(t, "encrypted earlier", s)
	q, err := DataConverter(only).ToPayload("plain")
	require.NoError(t, err)
	assert.Equal(t, "json/plain", string(q.Metadata[converter.MetadataEncoding]))
}

// TestNilCodecIsPlaintext: a caller's client built with DataConverter(nil) (no keys) reads and writes plaintext.
func TestNilCodecIsPlaintext(t *testing.T) {
	dc := DataConverter(nil)
	p, err := dc.ToPayload("code")
	require.NoError(t, err)
	assert.Equal(t, "json/plain", string(p.GetMetadata()[converter.MetadataEncoding]))
	var got string
	require.NoError(t, dc.FromPayload(p, &got))
	assert.Equal(t, "code", got)
}

// BenchmarkRoundTrip1KiB is one payload's trip through the codec (encrypt and decrypt, AES-256-GCM): a task's callback
// path writes about a dozen payloads (input, activities', the signal, the result, the summary), so the codec's share
// of a task's CPU is a few dozen of these against the bench's tens of milliseconds per task.
func BenchmarkRoundTrip1KiB(b *testing.B) {
	c := writeKeys(b, NewKeyLine("k1"))
	p := &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte("json/plain")}, Data: make([]byte, 1024)}
	b.SetBytes(int64(len(p.Data)))
	for b.Loop() {
		enc, err := c.Encode([]*commonpb.Payload{p})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Decode(enc); err != nil {
			b.Fatal(err)
		}
	}
}
