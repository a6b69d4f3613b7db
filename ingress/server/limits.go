package server

import (
	"container/list"
	"crypto/sha256"
	"math"
	"net"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Caps on the per-key state callers can create. An entry costs a few hundred bytes, so the worst case is a few
// tens of MiB however many keys a flood invents.
const (
	// maxBudgetKeys bounds the per-workflow and per-provider-ID signal budgets. Evicting a budget hands its key a
	// full one, which is harmless as long as cycling through the cache takes longer than a budget takes to refill:
	// untokened keys arrive at most INGRESS_UNTOKENED_RATE per second (65 536 / 50 per s ≈ 22 min against a
	// 2 min refill by default), and tokened keys need a valid token, i.e. a real task.
	maxBudgetKeys = 1 << 16
	// maxSeenCallbacks bounds the set of callbacks already signalled (32-byte hashes), for exact repeats.
	maxSeenCallbacks = 1 << 16
	// seenCallbackTTL is how long an exact repeat is recognised; providers repeat within seconds to minutes.
	seenCallbackTTL = 10 * time.Minute
	// maxClientLimiters bounds the per-IP rate limiters. An evicted limiter resets that client's budget; the global
	// limit still holds.
	maxClientLimiters = 1 << 14
	// activeSourceWindow is how long a client counts as an active source of untokened callbacks after its last
	// request, for the fair share; its limiter is forgotten then too (it would have refilled long before: its burst
	// is two seconds' worth).
	activeSourceWindow = 10 * time.Second
)

// boundedCache is an LRU map with a time to live per entry and a hard cap on entries, so state keyed by what
// callers send cannot grow without bound. Not safe for concurrent use; its owner locks.
type boundedCache[V any] struct {
	capacity int
	ttl      time.Duration
	order    *list.List // of *cacheEntry[V]; front is the most recently touched
	items    map[string]*list.Element
}

type cacheEntry[V any] struct {
	key     string
	val     V
	expires time.Time
}

func newBoundedCache[V any](capacity int, ttl time.Duration) *boundedCache[V] {
	return &boundedCache[V]{capacity: capacity, ttl: ttl, order: list.New(), items: map[string]*list.Element{}}
}

// get returns key's live value and renews its time to live; an expired entry counts as absent.
func (c *boundedCache[V]) get(key string, now time.Time) (V, bool) {
	el, ok := c.items[key]
	if !ok {
		var zero V
		return zero, false
	}
	e := el.Value.(*cacheEntry[V])
	if !now.Before(e.expires) {
		c.remove(el)
		var zero V
		return zero, false
	}
	e.expires = now.Add(c.ttl)
	c.order.MoveToFront(el)
	return e.val, true
}

// put stores val under key, first dropping expired entries from the old end and then, at capacity, the least
// recently touched one.
func (c *boundedCache[V]) put(key string, val V, now time.Time) {
	if el, ok := c.items[key]; ok {
		e := el.Value.(*cacheEntry[V])
		e.val, e.expires = val, now.Add(c.ttl)
		c.order.MoveToFront(el)
		return
	}
	c.expire(now)
	for c.order.Len() >= c.capacity {
		c.remove(c.order.Back())
	}
	c.items[key] = c.order.PushFront(&cacheEntry[V]{key: key, val: val, expires: now.Add(c.ttl)})
}

func (c *boundedCache[V]) remove(el *list.Element) {
	delete(c.items, el.Value.(*cacheEntry[V]).key)
	c.order.Remove(el)
}

func (c *boundedCache[V]) len() int { return c.order.Len() }

// expire drops the entries whose time to live ended by now (the least recently touched are at the back).
func (c *boundedCache[V]) expire(now time.Time) {
	for back := c.order.Back(); back != nil && !now.Before(back.Value.(*cacheEntry[V]).expires); back = c.order.Back() {
		c.remove(back)
	}
}

// bucket is a token bucket that can give a token back, which x/time/rate's reservations cannot once time moved.
type bucket struct {
	tokens float64
	last   time.Time
}

// signalBudget caps the signals one key (a workflow ID, a provider task ID) receives: burst at once, then one
// per refill. A flood against one key then adds a constant number of signals to that workflow's history, however
// many requests it sends.
type signalBudget struct {
	mu     sync.Mutex
	burst  float64
	refill time.Duration
	keys   *boundedCache[*bucket]
}

func newSignalBudget(burst int, refill time.Duration) *signalBudget {
	// An idle key is forgotten once its bucket would be full again: a new bucket is full, so nothing is lost.
	ttl := time.Duration(burst) * refill
	return &signalBudget{burst: float64(burst), refill: refill, keys: newBoundedCache[*bucket](maxBudgetKeys, ttl)}
}

// take spends one signal of key's budget; false means the budget is spent for now.
func (b *signalBudget) take(key string, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	bk, ok := b.keys.get(key, now)
	if !ok {
		bk = &bucket{tokens: b.burst, last: now}
		b.keys.put(key, bk, now)
	}
	if elapsed := now.Sub(bk.last); elapsed > 0 {
		bk.tokens = math.Min(b.burst, bk.tokens+float64(elapsed)/float64(b.refill))
		bk.last = now
	}
	if bk.tokens < 1 {
		return false
	}
	bk.tokens--
	return true
}

// refund returns a token taken for a signal Temporal never accepted, so the provider's retry is not suppressed.
func (b *signalBudget) refund(key string, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if bk, ok := b.keys.get(key, now); ok {
		bk.tokens = math.Min(b.burst, bk.tokens+1)
	}
}

// seenCallbacks remembers keys for a while: callbacks already handed to Temporal (as hashes, never the code), so an
// exact repeat is answered without another signal; provider task IDs whose untokened update was rejected.
type seenCallbacks struct {
	mu     sync.Mutex
	hashes *boundedCache[struct{}]
}

func newSeenCallbacks(ttl time.Duration) *seenCallbacks {
	return &seenCallbacks{hashes: newBoundedCache[struct{}](maxSeenCallbacks, ttl)}
}

// callbackKey identifies one callback's content on one route. Neither ID can contain NUL (their patterns forbid
// it), so the separators keep the encoding unambiguous; the code comes last and may contain anything.
func callbackKey(route, workflowID, providerTaskID, code string) string {
	sum := sha256.Sum256([]byte(route + "\x00" + workflowID + "\x00" + providerTaskID + "\x00" + code))
	return string(sum[:])
}

func (s *seenCallbacks) seen(key string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.hashes.get(key, now)
	return ok
}

func (s *seenCallbacks) add(key string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hashes.put(key, struct{}{}, now)
}

// clientRateLimit is the untokened route's admission control: each active source (client network) refills at a fair
// share of the global rate — global / active sources, at most the per-client rate — and the global limiter caps the
// sum, so a handful of clients cannot take the whole budget from the provider's own callbacks: six clients flooding
// at the per-client cap leave the provider a seventh of the global rate. A source keeps the per-client burst: a
// flooder never idles long enough to refill it, while the share an idle source leaves unused accumulates in the
// global bucket, where its burst finds it. A source is active while it sent a request within activeSourceWindow.
type clientRateLimit struct {
	global     *rate.Limiter
	globalRate float64
	perClient  float64
	mu         sync.Mutex
	clients    *boundedCache[*rate.Limiter] // the active sources; least recently seen at the back
}

func newClientRateLimit(globalPerSecond, perClientPerSecond float64) *clientRateLimit {
	return &clientRateLimit{
		global:     rate.NewLimiter(rate.Limit(globalPerSecond), burstFor(globalPerSecond)),
		globalRate: globalPerSecond,
		perClient:  perClientPerSecond,
		clients:    newBoundedCache[*rate.Limiter](maxClientLimiters, activeSourceWindow),
	}
}

// burstFor is twice the rate, at least one: a short burst of honest callbacks passes, a sustained flood does not.
func burstFor(perSecond float64) int { return max(1, int(math.Ceil(2*perSecond))) }

// allow admits one request from clientIP at now, or returns how long the caller should wait.
func (l *clientRateLimit) allow(clientIP string, now time.Time) (retryAfter time.Duration, ok bool) {
	lim, share := l.limiterFor(clientNetwork(clientIP), now)
	if !lim.AllowN(now, 1) {
		return retryAfterFor(share), false
	}
	if !l.global.AllowN(now, 1) {
		return retryAfterFor(l.global.Limit()), false
	}
	return 0, true
}

// limiterFor is key's limiter, set to the fair share of the sources active at now (key included).
func (l *clientRateLimit) limiterFor(key string, now time.Time) (*rate.Limiter, rate.Limit) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clients.expire(now)
	lim, found := l.clients.get(key, now)
	if !found {
		l.clients.put(key, nil, now) // count it before its share is computed
	}
	share := rate.Limit(math.Min(l.perClient, l.globalRate/float64(l.clients.len())))
	switch {
	case !found:
		lim = rate.NewLimiter(share, burstFor(l.perClient))
		l.clients.put(key, lim, now)
	case lim.Limit() != share:
		lim.SetLimitAt(now, share)
	}
	return lim, share
}

// activeSources is the number of sources sharing the global rate at now.
func (l *clientRateLimit) activeSources(now time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clients.expire(now)
	return l.clients.len()
}

// retryAfterFor is the time one token takes to come back at limit, in whole seconds, at least one.
func retryAfterFor(limit rate.Limit) time.Duration {
	if limit <= 0 {
		return time.Second
	}
	return max(time.Second, time.Duration(math.Ceil(1/float64(limit)))*time.Second)
}

// clientNetwork is the rate-limit key of a client address: the IPv4 address, or the /64 of an IPv6 one, since a
// single IPv6 host usually controls a whole /64.
func clientNetwork(ip string) string {
	parsed := net.ParseIP(ip)
	if parsed == nil {
		return ip
	}
	if v4 := parsed.To4(); v4 != nil {
		return v4.String()
	}
	return parsed.Mask(net.CIDRMask(64, 128)).String() + "/64"
}
