package server

import (
	"crypto/sha256"
	"math"
	"net"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
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

// ttlCache is an LRU of at most size keys, each forgotten ttl after it was last touched (by the caller's clock).
type ttlCache[V any] struct {
	lru *lru.Cache[string, stamped[V]]
	ttl time.Duration
}

type stamped[V any] struct {
	val     V
	expires time.Time
}

func newTTLCache[V any](size int, ttl time.Duration) ttlCache[V] {
	c, _ := lru.New[string, stamped[V]](size) // fails only for a size below one
	return ttlCache[V]{c, ttl}
}

// get returns key's live value and renews it.
func (c ttlCache[V]) get(key string, now time.Time) (V, bool) {
	if e, ok := c.lru.Get(key); ok && now.Before(e.expires) {
		c.put(key, e.val, now)
		return e.val, true
	}
	var zero V
	return zero, false
}

func (c ttlCache[V]) has(key string, now time.Time) bool { _, ok := c.get(key, now); return ok }

func (c ttlCache[V]) put(key string, val V, now time.Time) {
	c.lru.Add(key, stamped[V]{val, now.Add(c.ttl)})
}

func (c ttlCache[V]) add(key string, now time.Time) { var zero V; c.put(key, zero, now) }

// live drops the expired keys (the least recently touched are the oldest) and counts the rest.
func (c ttlCache[V]) live(now time.Time) int {
	for k, e, ok := c.lru.GetOldest(); ok && !now.Before(e.expires); k, e, ok = c.lru.GetOldest() {
		c.lru.Remove(k)
	}
	return c.lru.Len()
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
	keys   ttlCache[*bucket]
}

func newSignalBudget(burst int, refill time.Duration) *signalBudget {
	// An idle key is forgotten once its bucket would be full again, which a new one is.
	return &signalBudget{burst: float64(burst), refill: refill,
		keys: newTTLCache[*bucket](maxBudgetKeys, time.Duration(burst)*refill)}
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
	clients    ttlCache[*rate.Limiter]
}

func newClientRateLimit(globalPerSecond, perClientPerSecond float64) *clientRateLimit {
	return &clientRateLimit{
		global:     rate.NewLimiter(rate.Limit(globalPerSecond), burstFor(globalPerSecond)),
		globalRate: globalPerSecond,
		perClient:  perClientPerSecond,
		clients:    newTTLCache[*rate.Limiter](maxClientLimiters, activeSourceWindow),
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
	lim, found := l.clients.get(key, now)
	if !found {
		l.clients.put(key, nil, now) // counted before its share is computed
	}
	share := rate.Limit(math.Min(l.perClient, l.globalRate/float64(l.clients.live(now))))
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
	return l.clients.live(now)
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
