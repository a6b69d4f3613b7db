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

// Caps on the per-key state callers can create: a few tens of MiB however many keys a flood invents. An evicted
// budget is a full one again, harmless while cycling the cache takes longer than a refill (≈22 min at 50/s).
const (
	maxBudgetKeys     = 1 << 16
	maxSeenCallbacks  = 1 << 16
	maxClientLimiters = 1 << 14
	seenCallbackTTL   = 10 * time.Minute // providers repeat within seconds to minutes
	// activeSourceWindow: a client is an active source (for the fair share) this long after its last request.
	activeSourceWindow = 10 * time.Second
)

// boundedCache is an LRU map with a time to live per entry and a cap on entries; its owner locks.
type boundedCache[V any] struct {
	capacity int
	ttl      time.Duration
	order    *list.List // of *cacheEntry[V]; most recently touched in front
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

// get returns key's live value and renews its time to live.
func (c *boundedCache[V]) get(key string, now time.Time) (V, bool) {
	var zero V
	el, ok := c.items[key]
	if !ok {
		return zero, false
	}
	if e := el.Value.(*cacheEntry[V]); now.Before(e.expires) {
		e.expires = now.Add(c.ttl)
		c.order.MoveToFront(el)
		return e.val, true
	}
	c.remove(el)
	return zero, false
}

// put stores val under key, evicting expired entries and then, at capacity, the least recently touched.
func (c *boundedCache[V]) put(key string, val V, now time.Time) {
	if el, ok := c.items[key]; ok {
		c.remove(el)
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

func (c *boundedCache[V]) expire(now time.Time) {
	for b := c.order.Back(); b != nil && !now.Before(b.Value.(*cacheEntry[V]).expires); b = c.order.Back() {
		c.remove(b)
	}
}

// bucket is a token bucket that can give a token back, which x/time/rate cannot once time moved.
type bucket struct {
	tokens float64
	last   time.Time
}

// signalBudget caps the signals one key (workflow ID, provider task ID) gets: burst at once, then one per refill,
// so a flood adds a constant number of events to a workflow's history.
type signalBudget struct {
	mu     sync.Mutex
	burst  float64
	refill time.Duration
	keys   *boundedCache[*bucket]
}

func newSignalBudget(burst int, refill time.Duration) *signalBudget {
	// An idle key is forgotten once its bucket would be full again, which a new one is.
	return &signalBudget{burst: float64(burst), refill: refill,
		keys: newBoundedCache[*bucket](maxBudgetKeys, time.Duration(burst)*refill)}
}

// take spends one signal of key's budget; false means it is spent for now.
func (b *signalBudget) take(key string, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	bk, ok := b.keys.get(key, now)
	if !ok {
		bk = &bucket{tokens: b.burst, last: now}
		b.keys.put(key, bk, now)
	}
	if elapsed := now.Sub(bk.last); elapsed > 0 {
		bk.tokens, bk.last = math.Min(b.burst, bk.tokens+float64(elapsed)/float64(b.refill)), now
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

// seenCallbacks remembers keys for a while: hashes of callbacks handed to Temporal (never the code), provider task
// IDs whose untokened update was rejected.
type seenCallbacks struct {
	mu     sync.Mutex
	hashes *boundedCache[struct{}]
}

func newSeenCallbacks(ttl time.Duration) *seenCallbacks {
	return &seenCallbacks{hashes: newBoundedCache[struct{}](maxSeenCallbacks, ttl)}
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

// callbackKey identifies one callback's content on one route; no ID can hold NUL, so the encoding is unambiguous.
func callbackKey(route, workflowID, providerTaskID, code string) string {
	sum := sha256.Sum256([]byte(route + "\x00" + workflowID + "\x00" + providerTaskID + "\x00" + code))
	return string(sum[:])
}

// clientRateLimit admits untokened callbacks: each active source refills at a fair share (global / active
// sources, at most the per-client rate) and the global limiter caps the sum, so a few flooders cannot starve the
// provider's own callbacks.
type clientRateLimit struct {
	global     *rate.Limiter
	globalRate float64
	perClient  float64
	mu         sync.Mutex
	clients    *boundedCache[*rate.Limiter]
}

func newClientRateLimit(globalPerSecond, perClientPerSecond float64) *clientRateLimit {
	return &clientRateLimit{
		global:     rate.NewLimiter(rate.Limit(globalPerSecond), burstFor(globalPerSecond)),
		globalRate: globalPerSecond,
		perClient:  perClientPerSecond,
		clients:    newBoundedCache[*rate.Limiter](maxClientLimiters, activeSourceWindow),
	}
}

// burstFor is two seconds' worth: a short burst of honest callbacks passes, a sustained flood does not.
func burstFor(perSecond float64) int { return max(1, int(math.Ceil(2*perSecond))) }

// allow admits one request from clientIP at now, or says how long the caller should wait.
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
		l.clients.put(key, nil, now) // counted before its share is computed
	}
	share := rate.Limit(math.Min(l.perClient, l.globalRate/float64(l.clients.len())))
	if !found {
		lim = rate.NewLimiter(share, burstFor(l.perClient))
		l.clients.put(key, lim, now)
	} else if lim.Limit() != share {
		lim.SetLimitAt(now, share)
	}
	return lim, share
}

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

// clientNetwork keys the rate limit: the IPv4 address, or the /64 of an IPv6 one (one host usually holds a /64).
func clientNetwork(ip string) string {
	parsed := net.ParseIP(ip)
	switch {
	case parsed == nil:
		return ip
	case parsed.To4() != nil:
		return parsed.To4().String()
	}
	return parsed.Mask(net.CIDRMask(64, 128)).String() + "/64"
}
