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
	maxBudgetKeys      = 1 << 16
	maxSeenCallbacks   = 1 << 16
	maxClientLimiters  = 1 << 14
	seenCallbackTTL    = 10 * time.Minute // providers repeat within seconds to minutes
	activeSourceWindow = 10 * time.Second // a client counts for the fair share this long after its last request
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
	e, ok := c.lru.Get(key)
	if ok = ok && now.Before(e.expires); ok {
		c.put(key, e.val, now)
	}
	return e.val, ok
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

// limiters is a token bucket per key (workflow ID, provider task ID, client network), forgotten ttl after its last use.
type limiters struct {
	mu    sync.Mutex
	keys  ttlCache[*rate.Limiter]
	limit rate.Limit
	burst int
}

func newLimiters(size int, ttl time.Duration, limit rate.Limit, burst int) *limiters {
	return &limiters{keys: newTTLCache[*rate.Limiter](size, ttl), limit: limit, burst: burst}
}

// get is key's limiter, a full one if key is new; live is how many keys were used within ttl, key included.
func (l *limiters) get(key string, now time.Time) (lim *rate.Limiter, live int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, ok := l.keys.get(key, now)
	if !ok {
		lim = rate.NewLimiter(l.limit, l.burst)
		l.keys.put(key, lim, now)
	}
	return lim, l.keys.live(now)
}

// signalBudget caps a key's signals at burst, then one per refill, so a flood adds a constant number of events to a
// history; an idle key is forgotten once its bucket would be full again, which a new one is.
func newSignalBudget(burst int, refill time.Duration) *limiters {
	return newLimiters(maxBudgetKeys, time.Duration(burst)*refill, rate.Every(refill), burst)
}

// take spends one signal of key's budget; false means it is spent for now.
func (l *limiters) take(key string, now time.Time) bool {
	lim, _ := l.get(key, now)
	return lim.AllowN(now, 1)
}

// refund returns a token taken for a signal Temporal never took, so the retry is not suppressed (rate re-caps the burst).
func (l *limiters) refund(key string, now time.Time) { lim, _ := l.get(key, now); lim.AllowN(now, -1) }

// callbackKey identifies one callback's content on one route; no ID can hold NUL, so the encoding is unambiguous.
func callbackKey(route, workflowID, providerTaskID, code string) string {
	sum := sha256.Sum256([]byte(route + "\x00" + workflowID + "\x00" + providerTaskID + "\x00" + code))
	return string(sum[:])
}

// clientRateLimit gives each active source a fair share (global / active sources, at most per-client) under the global
// cap, so a few flooders cannot starve the provider's callbacks; bursts of two seconds' worth pass, a flood not.
type clientRateLimit struct {
	global    *rate.Limiter
	perClient float64
	clients   *limiters
}

func newClientRateLimit(global, perClient float64) *clientRateLimit {
	burst := func(perSecond float64) int { return max(1, int(math.Ceil(2*perSecond))) }
	return &clientRateLimit{rate.NewLimiter(rate.Limit(global), burst(global)), perClient,
		newLimiters(maxClientLimiters, activeSourceWindow, rate.Limit(perClient), burst(perClient))}
}

// allow admits one request from clientIP at now, or says how long the caller should wait.
func (l *clientRateLimit) allow(clientIP string, now time.Time) (retryAfter time.Duration, ok bool) {
	for _, lim := range []*rate.Limiter{l.limiterFor(clientNetwork(clientIP), now), l.global} {
		if !lim.AllowN(now, 1) {
			// The time one token takes to come back, in whole seconds, at least one.
			return max(time.Second, time.Duration(math.Ceil(1/float64(lim.Limit())))*time.Second), false
		}
	}
	return 0, true
}

// limiterFor is key's limiter, set to the fair share of the sources active at now (key included).
func (l *clientRateLimit) limiterFor(key string, now time.Time) *rate.Limiter {
	lim, active := l.clients.get(key, now)
	if share := rate.Limit(math.Min(l.perClient, float64(l.global.Limit())/float64(active))); lim.Limit() != share {
		lim.SetLimitAt(now, share)
	}
	return lim
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
