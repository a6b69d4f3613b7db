package workflows

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/captchaflow/captchaflow/codec"
)

// keyRing is a schedule's payload codec: everything encrypted under the current key, rotated at a drawn instant as
// an operator does while tasks run (the next key first, the old one kept), every key still decrypting.
type keyRing struct {
	mu      sync.Mutex
	current *codec.Codec   // encrypts
	all     *codec.Codec   // decrypts, and encrypts once rotated
	written map[string]int // payloads encrypted, by key ID
}

func (k *keyRing) Encode(p []*commonpb.Payload) ([]*commonpb.Payload, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.written[k.current.CurrentKeyID()] += len(p)
	return k.current.Encode(p)
}

func (k *keyRing) Decode(p []*commonpb.Payload) ([]*commonpb.Payload, error) { return k.all.Decode(p) }

func (k *keyRing) rotate() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.current = k.all
}

// drawKeys: a quarter of the schedules run encrypted, most of them rotating the key mid-run. Its own generator,
// so every other draw of a seed is what it was.
func (s *schedule) drawKeys(seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0xc0dec))
	if rng.IntN(4) != 0 {
		return
	}
	dir := s.t.TempDir()
	old, next := codec.NewKeyLine("model-old"), codec.NewKeyLine("model-next")
	load := func(name, lines string) *codec.Codec {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(lines), 0o600); err != nil {
			s.t.Fatal(err)
		}
		c, err := codec.Load(path)
		if err != nil {
			s.t.Fatal(err)
		}
		return c
	}
	s.keys = &keyRing{current: load("old", old), all: load("rotated", next+old), written: map[string]int{}}
	dc := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), s.keys)
	s.env.SetDataConverter(dc)
	s.env.SetFailureConverter(temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{
		DataConverter: dc, EncodeCommonAttributes: true}))
	if rng.IntN(4) != 0 {
		s.env.RegisterDelayedCallback(s.keys.rotate, time.Duration(1+rng.IntN(300))*time.Second)
	}
}

// coverKeys tallies the schedules that ran encrypted, and those whose tasks wrote under both keys.
func (s *schedule) coverKeys(covered map[string]int) {
	if s.keys == nil {
		return
	}
	covered["encrypted"]++
	s.keys.mu.Lock() // a worker goroutine of the ended schedule may still be encoding
	defer s.keys.mu.Unlock()
	if s.keys.written["model-old"] > 0 && s.keys.written["model-next"] > 0 {
		covered["keys-rotated-mid-task"]++
	}
}
