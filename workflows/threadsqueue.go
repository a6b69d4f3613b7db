package workflows

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/captchaflow/captchaflow/activities"
)

// The semaphore's queue: first come, first served, with the membership and removal of a request in constant time
// (a release, a retried ask), since it may hold tens of thousands.

// slotKey names one request: submission seq of one run of a task.
type slotKey struct {
	wf, run string
	seq     int
}

func requestKey(r activities.SlotRequest) slotKey { return slotKey{r.WorkflowID, r.RunID, r.Seq} }

func releaseKey(r activities.SlotRelease) slotKey { return slotKey{r.WorkflowID, r.RunID, r.Seq} }

// slotQueue keeps requests in arrival order. A removed request stays in items until the head passes it; live maps
// each queued request to its absolute position (base + index in items), so a request removed and queued again is
// not mistaken for its old entry.
type slotQueue struct {
	items []activities.SlotRequest
	head  int // items before it are gone
	base  int
	live  map[slotKey]int
}

func newSlotQueue(reqs []activities.SlotRequest) *slotQueue {
	q := &slotQueue{live: map[slotKey]int{}}
	for _, r := range reqs {
		q.push(r)
	}
	return q
}

func (q *slotQueue) len() int { return len(q.live) }

func (q *slotQueue) has(k slotKey) bool { _, ok := q.live[k]; return ok }

func (q *slotQueue) get(k slotKey) (activities.SlotRequest, bool) {
	pos, ok := q.live[k]
	if !ok {
		return activities.SlotRequest{}, false
	}
	return q.items[pos-q.base], true
}

// push queues r unless it is queued already.
func (q *slotQueue) push(r activities.SlotRequest) bool {
	k := requestKey(r)
	if q.has(k) {
		return false
	}
	q.live[k] = q.base + len(q.items)
	q.items = append(q.items, r)
	return true
}

func (q *slotQueue) remove(k slotKey) bool {
	if !q.has(k) {
		return false
	}
	delete(q.live, k)
	q.skipDead()
	return true
}

// peek is the first request in line.
func (q *slotQueue) peek() (activities.SlotRequest, bool) {
	q.skipDead()
	if q.head == len(q.items) {
		return activities.SlotRequest{}, false
	}
	return q.items[q.head], true
}

func (q *slotQueue) pop() (activities.SlotRequest, bool) {
	r, ok := q.peek()
	if ok {
		q.remove(requestKey(r))
	}
	return r, ok
}

func (q *slotQueue) alive(i int) bool {
	pos, ok := q.live[requestKey(q.items[i])]
	return ok && pos == q.base+i
}

// skipDead moves the head past removed requests, and drops the passed ones once they are half of items.
func (q *slotQueue) skipDead() {
	for q.head < len(q.items) && !q.alive(q.head) {
		q.head++
	}
	if q.head > 64 && q.head*2 > len(q.items) {
		q.items = slices.Clone(q.items[q.head:])
		q.base += q.head
		q.head = 0
	}
}

// list is the first n requests in line (all with n < 0).
func (q *slotQueue) list(n int) []activities.SlotRequest {
	var out []activities.SlotRequest
	for i := q.head; i < len(q.items) && (n < 0 || len(out) < n); i++ {
		if q.alive(i) {
			out = append(out, q.items[i])
		}
	}
	return out
}

// sortByRequestedAt puts the line in the order the tasks first asked (after a replacement they re-register in any
// order).
func (q *slotQueue) sortByRequestedAt() {
	all := q.list(-1)
	slices.SortStableFunc(all, func(a, b activities.SlotRequest) int { return a.RequestedAt.Compare(b.RequestedAt) })
	*q = *newSlotQueue(all)
}

// The packed queue: the semaphore's second input, so that 10 000 queued requests stay far below Temporal's 2 MB
// payload limit (as JSON they took 150-340 bytes each). Per request: a flags byte, the workflow ID, the run ID (16
// bytes when it is a UUID), the sequence number, the legacy thread count when set, and the request time as a
// difference to the previous one in milliseconds; the whole gzipped.

const (
	packLegacy byte = 1 << iota
	packUUIDRun
)

func packQueue(reqs []activities.SlotRequest) ([]byte, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	var raw []byte
	raw = binary.AppendUvarint(raw, uint64(len(reqs)))
	var prev int64
	for _, r := range reqs {
		raw = packRequest(raw, r, prev)
		prev = r.RequestedAt.UnixMilli()
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(raw); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func packRequest(raw []byte, r activities.SlotRequest, prevMS int64) []byte {
	var flags byte
	if r.Threads > 0 {
		flags |= packLegacy
	}
	run, err := uuid.Parse(r.RunID)
	if err == nil && run.String() == r.RunID {
		flags |= packUUIDRun
	}
	raw = append(raw, flags)
	raw = appendString(raw, r.WorkflowID)
	if flags&packUUIDRun != 0 {
		raw = append(raw, run[:]...)
	} else {
		raw = appendString(raw, r.RunID)
	}
	raw = binary.AppendUvarint(raw, uint64(r.Seq))
	if flags&packLegacy != 0 {
		raw = binary.AppendUvarint(raw, uint64(r.Threads))
	}
	return binary.AppendVarint(raw, r.RequestedAt.UnixMilli()-prevMS)
}

func appendString(raw []byte, s string) []byte {
	raw = binary.AppendUvarint(raw, uint64(len(s)))
	return append(raw, s...)
}

// maxPackedQueue bounds the unpacked queue read back (a corrupt length must not allocate without bound).
const maxPackedQueue = 1 << 20

func unpackQueue(packed []byte) ([]activities.SlotRequest, error) {
	if len(packed) == 0 {
		return nil, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(packed))
	if err != nil {
		return nil, fmt.Errorf("packed queue: %w", err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("packed queue: %w", err)
	}
	d := unpacker{raw: raw}
	n := d.uvarint()
	if n > maxPackedQueue {
		return nil, fmt.Errorf("packed queue: %d requests", n)
	}
	reqs := make([]activities.SlotRequest, 0, n)
	var prev int64
	for range n {
		r := d.request(prev)
		prev = r.RequestedAt.UnixMilli()
		reqs = append(reqs, r)
	}
	if d.err != nil {
		return nil, fmt.Errorf("packed queue: %w", d.err)
	}
	return reqs, nil
}

// unpacker reads packRequest's encoding; the first error sticks and zero values follow it.
type unpacker struct {
	raw []byte
	err error
}

var errShortPack = errors.New("truncated")

func (d *unpacker) request(prevMS int64) activities.SlotRequest {
	var r activities.SlotRequest
	flags := d.bytes(1)
	if len(flags) == 0 {
		return r
	}
	r.WorkflowID = string(d.bytes(d.uvarint()))
	if flags[0]&packUUIDRun != 0 {
		if b := d.bytes(16); len(b) == 16 {
			r.RunID = uuid.UUID(b).String()
		}
	} else {
		r.RunID = string(d.bytes(d.uvarint()))
	}
	r.Seq = int(d.uvarint())
	if flags[0]&packLegacy != 0 {
		r.Threads = int(d.uvarint())
	}
	r.RequestedAt = time.UnixMilli(prevMS + d.varint()).UTC()
	return r
}

func (d *unpacker) bytes(n uint64) []byte {
	if d.err != nil || n > uint64(len(d.raw)) {
		d.err = errShortPack
		return nil
	}
	b := d.raw[:n]
	d.raw = d.raw[n:]
	return b
}

func (d *unpacker) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.raw)
	if n <= 0 {
		d.err = errShortPack
		return 0
	}
	d.raw = d.raw[n:]
	return v
}

func (d *unpacker) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.raw)
	if n <= 0 {
		d.err = errShortPack
		return 0
	}
	d.raw = d.raw[n:]
	return v
}
