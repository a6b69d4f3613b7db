// Package codec encrypts every payload captchaflow writes to Temporal (AES-256-GCM, the format of Temporal's
// encryption samples) and serves Temporal's remote codec protocol to the Web UI and the CLI (server.go).
package codec

import (
	"cmp"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"
)

// KeysFileEnv names the keys file every process reads; unset, payloads stay plaintext (as before the codec).
const KeysFileEnv = "CAPTCHAFLOW_KEYS_FILE"

// The metadata of Temporal's encryption samples (Go, TypeScript, Python), so their codecs read ours.
const (
	EncodingEncrypted = "binary/encrypted"
	MetadataKeyID     = "encryption-key-id"
)

// Codec is a converter.PayloadCodec: the current key encrypts, every key decrypts.
type Codec struct {
	current   string
	plaintext bool // the file starts with "-": decrypt only (switching encryption on or off across a fleet)
	keys      map[string]cipher.AEAD
}

// CurrentKeyID is the ID new payloads carry, "" when they stay plaintext (an ID, never key material: safe to log).
func (c *Codec) CurrentKeyID() string { return c.current }

// Load reads a keys file: "id:base64(32 bytes)" lines, the first current, "#" comments; a first line "-" only decrypts.
func Load(path string) (*Codec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", KeysFileEnv, err)
	}
	c := &Codec{keys: map[string]cipher.AEAD{}}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if line == "-" && len(c.keys) == 0 {
			c.plaintext = true
			continue
		}
		if err := c.add(line); err != nil { // the line is never quoted: it holds a key
			return nil, fmt.Errorf("%s %s line %d: %w", KeysFileEnv, path, i+1, err)
		}
	}
	if len(c.keys) == 0 {
		return nil, fmt.Errorf("%s %s holds no key (one \"id:base64key\" a line, the first encrypts)", KeysFileEnv, path)
	}
	return c, nil
}

// add parses one "id:base64key" line; the first added becomes the current key.
func (c *Codec) add(line string) error {
	id, b64, ok := strings.Cut(line, ":")
	id = strings.TrimSpace(id)
	if !ok || id == "" || strings.ContainsAny(id, " \t") {
		return errors.New(`want "id:base64key" with a key ID free of spaces`)
	}
	if _, dup := c.keys[id]; dup {
		return fmt.Errorf("key ID %q appears twice", id)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
	if err != nil || len(key) != 32 {
		return fmt.Errorf("key %q is not base64 of 32 bytes (AES-256)", id)
	}
	block, _ := aes.NewCipher(key) // a 32-byte key cannot fail
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return err
	}
	if len(c.keys) == 0 && !c.plaintext {
		c.current = id
	}
	c.keys[id] = aead
	return nil
}

// NewKeyLine is a fresh keys-file line under id (make run's first start, an operator's rotation).
func NewKeyLine(id string) string {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand.Read never fails on supported platforms
	return id + ":" + base64.StdEncoding.EncodeToString(key) + "\n"
}

// Encode encrypts each whole payload (its metadata too) under the current key: nonce ‖ ciphertext ‖ tag.
func (c *Codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	if c.plaintext {
		return payloads, nil
	}
	aead := c.keys[c.current]
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		plain, err := proto.Marshal(p)
		if err != nil {
			return payloads, err
		}
		nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
		_, _ = rand.Read(nonce)
		out[i] = &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(EncodingEncrypted),
			MetadataKeyID: []byte(c.current)}, Data: aead.Seal(nonce, nonce, plain, nil)}
	}
	return out, nil
}

// Decode decrypts encrypted payloads and passes others through: histories written before the codec still read.
func (c *Codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		if string(p.GetMetadata()[converter.MetadataEncoding]) != EncodingEncrypted {
			out[i] = p
			continue
		}
		id := string(p.GetMetadata()[MetadataKeyID])
		aead, ok := c.keys[id]
		if !ok {
			return payloads, fmt.Errorf("payload encrypted under key %.40q, which %s does not hold (a key removed too early?)", id, KeysFileEnv)
		}
		n := aead.NonceSize()
		if len(p.GetData()) < n+aead.Overhead() {
			return payloads, fmt.Errorf("payload under key %.40q is too short to be ciphertext", id)
		}
		plain, err := aead.Open(nil, p.Data[:n], p.Data[n:], nil)
		if err != nil {
			return payloads, fmt.Errorf("payload under key %.40q does not decrypt (tampered, or another key with its ID)", id)
		}
		out[i] = &commonpb.Payload{}
		if err := proto.Unmarshal(plain, out[i]); err != nil {
			return payloads, fmt.Errorf("payload under key %.40q: %w", id, err)
		}
	}
	return out, nil
}

// DataConverter is the SDK's default converter, through c when it is not nil (nil: plaintext, for a caller's client).
func DataConverter(c *Codec) converter.DataConverter {
	if c == nil {
		return converter.GetDefaultDataConverter()
	}
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c)
}

// Configure gives opts the converters of the keys file at path, encrypting payloads and failures ("": plaintext, with a
// warning when logger is set). Every process calls it before dialling, as callers of captchaflow.Start and Solve should.
func Configure(opts *client.Options, path string, logger *slog.Logger) (*Codec, error) {
	logger = cmp.Or(logger, slog.New(slog.DiscardHandler))
	if path == "" {
		logger.Warn(KeysFileEnv + " is unset: payloads are written to Temporal in plaintext")
		return nil, nil
	}
	c, err := Load(path)
	if err != nil {
		return nil, err
	}
	opts.DataConverter = DataConverter(c)
	// Decrypt-only leaves failures as they were, so a previous release reads them.
	opts.FailureConverter = temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{
		DataConverter: opts.DataConverter, EncodeCommonAttributes: !c.plaintext})
	logger.Info("payload codec", "encrypting_with", c.current, "keys", len(c.keys))
	return c, nil
}
