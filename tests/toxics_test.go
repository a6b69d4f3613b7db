package tests

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"io"
	"regexp"
	"sync"

	"github.com/Shopify/toxiproxy/v2/toxics"
)

// tapToxicType is a toxiproxy toxic of our own: it watches the bytes of a link for workflow IDs (the regular
// expression of a registered tap) and, with drop set, swallows them instead of passing them on. On the
// ingress-to-Temporal leg a dropping tap turns every SignalWorkflowExecution into a hang while telling the test
// exactly which workflows' signals the ingress had already sent: the moment to SIGKILL it "after accept".
//
// A process may gzip its gRPC requests (CAPTCHAFLOW_GRPC_COMPRESSION=gzip, earlier releases always), so besides the raw
// bytes the tap reads the link as HTTP/2: it reassembles the gRPC messages of DATA frames, gunzips them and searches
// those too (workflow IDs are plain protobuf strings).
const tapToxicType = "e2e_tap"

type tapToxic struct {
	Tap  string `json:"tap"`
	Drop bool   `json:"drop"`
}

// tap records the distinct matches seen by every link carrying a tapToxic with its name.
type tap struct {
	re   *regexp.Regexp
	mu   sync.Mutex
	seen map[string]bool
}

var taps sync.Map // name -> *tap

// newTap registers a tap and returns it with the toxic JSON that installs it (upstream: client to server).
func newTap(name string, pattern *regexp.Regexp, drop bool) (*tap, string) {
	t := &tap{re: pattern, seen: map[string]bool{}}
	taps.Store(name, t)
	attrs, _ := json.Marshal(tapToxic{Tap: name, Drop: drop})
	return t, `{"name":"` + name + `","type":"` + tapToxicType + `","stream":"upstream","attributes":` + string(attrs) + `}`
}

// Seen returns the distinct matches so far.
func (t *tap) Seen() map[string]bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]bool, len(t.seen))
	for k := range t.seen {
		out[k] = true
	}
	return out
}

func (t *tap) observe(b []byte) {
	matches := t.re.FindAll(b, -1)
	if len(matches) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range matches {
		t.seen[string(m)] = true
	}
}

// tapOverlap bytes of the previous chunk are searched again with the next, so an ID split across two reads is
// still seen.
const tapOverlap = 256

func (x *tapToxic) Pipe(stub *toxics.ToxicStub) {
	v, _ := taps.Load(x.Tap)
	t, _ := v.(*tap)
	var tail []byte
	h2 := &grpcScanner{streams: map[uint32][]byte{}}
	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				return
			}
			if t != nil {
				buf := append(append([]byte(nil), tail...), c.Data...)
				t.observe(buf)
				tail = buf[max(0, len(buf)-tapOverlap):]
				h2.feed(c.Data, t.observe)
			}
			if !x.Drop {
				stub.Output <- c
			}
		}
	}
}

func init() { toxics.Register(tapToxicType, new(tapToxic)) }

// grpcScanner reassembles the gRPC messages a client sends over HTTP/2 (one direction of a connection, picked up
// at a frame boundary or at the connection preface) and hands each, decompressed, to found. Anything it cannot
// parse makes it give up quietly; the raw scan still runs.
type grpcScanner struct {
	buf     []byte
	started bool
	broken  bool
	streams map[uint32][]byte
}

var http2Preface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

const (
	http2FrameData     = 0x0
	http2FlagEndStream = 0x1
	http2FlagPadded    = 0x8
	http2MaxFrame      = 1 << 24
)

func (g *grpcScanner) feed(chunk []byte, found func([]byte)) {
	if g.broken {
		return
	}
	g.buf = append(g.buf, chunk...)
	if !g.started {
		if len(g.buf) < len(http2Preface) && bytes.HasPrefix(http2Preface, g.buf) {
			return // maybe the start of a preface
		}
		g.buf = bytes.TrimPrefix(g.buf, http2Preface)
		g.started = true
	}
	for len(g.buf) >= 9 {
		length := int(g.buf[0])<<16 | int(g.buf[1])<<8 | int(g.buf[2])
		typ, flags := g.buf[3], g.buf[4]
		stream := binary.BigEndian.Uint32(g.buf[5:9]) & 0x7fffffff
		if length >= http2MaxFrame || typ > 0x9 {
			g.broken = true
			return
		}
		if len(g.buf) < 9+length {
			return
		}
		payload := g.buf[9 : 9+length]
		g.buf = g.buf[9+length:]
		if typ != http2FrameData {
			continue
		}
		if flags&http2FlagPadded != 0 && len(payload) > 0 {
			pad := int(payload[0])
			if pad >= len(payload) {
				g.broken = true
				return
			}
			payload = payload[1 : len(payload)-pad]
		}
		msgs := append(g.streams[stream], payload...)
		for len(msgs) >= 5 {
			n := int(binary.BigEndian.Uint32(msgs[1:5]))
			if len(msgs) < 5+n {
				break
			}
			msg := msgs[5 : 5+n]
			if msgs[0] == 1 {
				if r, err := gzip.NewReader(bytes.NewReader(msg)); err == nil {
					msg, _ = io.ReadAll(io.LimitReader(r, 16<<20))
				}
			}
			found(msg)
			msgs = msgs[5+n:]
		}
		if flags&http2FlagEndStream != 0 {
			delete(g.streams, stream)
		} else {
			g.streams[stream] = append([]byte(nil), msgs...)
		}
	}
}
