package providers

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/captchaflow/captchaflow/providers/callback"
)

const (
	// maxBatchIDs bounds res.php's action=get&ids= (2captcha states no bound; 100 keeps the URL near 1.3 KB).
	maxBatchIDs = 100
	maxSenders  = 4                     // requests in flight at once per client: a slow answer does not hold every poll behind it
	gatherLull  = 50 * time.Millisecond // a request after a lull waits this long for the lookups of the same moment
)

type methodKey struct{}

// ForMethod marks ctx's result lookup as one of method's: only a method whose codes are bare (bareCodes) is batched.
func ForMethod(ctx context.Context, method string) context.Context {
	return context.WithValue(ctx, methodKey{}, method)
}

// WithResultBatching sets the least spacing of a client's res.php requests, so lookups arriving meanwhile share the next
// (default 1 s: the server spreads an account's polls evenly, so a shorter one meets them one by one; < 0: one per lookup).
func WithResultBatching(gather time.Duration) Option { return func(c *conn) { c.gather = gather } }

// lookups are the Get calls of one client waiting for a request: at most maxSenders goroutines send them.
type lookups struct {
	mu      sync.Mutex
	queue   []*lookup
	senders int
	last    time.Time      // when the latest request was sent: the next waits until gather has passed since
	proven  atomic.Bool    // an answer split into one part per ID: the provider answers ids
	tally   map[string]int // per method: 1 once its batch split, else minus its batches that did not
}

// batching: a method's lookups share requests when its codes are bare, unless three of its batches failed to split
// before one did (a provider without ids, codes holding "|" after all): one method never stops the others'.
func (c *InPHP) batching(method string) bool {
	kind, err := KindOf(method, nil)
	c.lookups.mu.Lock()
	defer c.lookups.mu.Unlock()
	return c.gather >= 0 && err == nil && slices.Contains(bareCodes, kind) && c.lookups.tally[method] > -3
}

type lookup struct {
	ctx        context.Context
	id, method string
	done       chan result // buffered: a sender never waits on a caller that left
}

type result struct {
	code string
	err  error
}

// enqueue adds l, and starts a sender when those running already have more than a request's worth to take.
func (c *InPHP) enqueue(l *lookup) {
	c.lookups.mu.Lock()
	defer c.lookups.mu.Unlock()
	c.lookups.queue = append(c.lookups.queue, l)
	if len(c.lookups.queue) > c.lookups.senders*maxBatchIDs && c.lookups.senders < maxSenders {
		c.lookups.senders++
		go c.send()
	}
}

// send takes up to maxBatchIDs waiting lookups per request, after the gather window, until none wait.
func (c *InPHP) send() {
	for {
		c.lookups.mu.Lock()
		wait := max(gatherLull, time.Until(c.lookups.last.Add(c.gather)))
		c.lookups.mu.Unlock()
		time.Sleep(wait) // the lookups arriving meanwhile join this request
		c.lookups.mu.Lock()
		q := slices.DeleteFunc(c.lookups.queue, func(l *lookup) bool { return l.ctx.Err() != nil }) // callers gone
		batch := q[:min(len(q), maxBatchIDs)]
		c.lookups.queue = slices.Clone(q[len(batch):])
		if len(batch) == 0 {
			c.lookups.senders--
			c.lookups.mu.Unlock()
			return
		}
		c.lookups.last = time.Now()
		c.lookups.mu.Unlock()
		for _, group := range byMethod(batch) { // a method's own request: a batch that fails to split is its alone
			if len(group) == 1 { // a lone ID keeps action=get&id=, and its caller's context
				code, err := c.getOne(group[0].ctx, group[0].id)
				group[0].done <- result{code, err}
			} else {
				c.getBatch(group)
			}
		}
	}
}

// byMethod splits batch into one group per method, in order.
func byMethod(batch []*lookup) (groups [][]*lookup) {
	for _, l := range batch {
		i := slices.IndexFunc(groups, func(g []*lookup) bool { return g[0].method == l.method })
		if i < 0 {
			i, groups = len(groups), append(groups, nil)
		}
		groups[i] = append(groups[i], l)
	}
	return groups
}

// getBatch asks for batch's IDs in one request and answers each caller from its slot; an answer that does not split
// into one part per ID (an answer holding "|", a provider without ids) is asked again ID by ID, never guessed.
func (c *InPHP) getBatch(batch []*lookup) {
	ids := make([]string, len(batch))
	for i, l := range batch {
		ids[i] = l.id
	}
	query := url.Values{"action": {"get"}, "key": {c.apiKey}, "json": {"1"}, "ids": {strings.Join(ids, ",")}}
	// No caller's context: one leaving must not cancel the others' request (do bounds it by the timeout).
	ans, err := c.call(context.Background(), "get", http.MethodGet, c.resURL+"?"+query.Encode(), "", nil)
	parts := strings.Split(cmp.Or(ans.Value, ans.Code), "|")
	shared := err != nil && !errors.Is(err, callback.ErrMalformed) && (ans.Code == "" || !perTask[ClassOf(err)])
	_, refused := RateLimited(err) // the account said too many: asking each ID alone would say it again, n times
	var wg sync.WaitGroup
	for i, l := range batch {
		switch {
		case shared && (c.lookups.proven.Load() || refused): // the network's or the account's (a ban, a rate limit)
			l.done <- result{err: err}
		case shared || len(parts) != len(batch):
			wg.Go(func() { code, err := c.getOne(l.ctx, l.id); l.done <- result{code, err} })
		case callback.IsStatusWord(parts[i]):
			l.done <- result{err: c.codeError("get", parts[i], "", 0)}
		default:
			code, err := c.checkCode("get", parts[i])
			l.done <- result{code, err}
		}
	}
	if method := batch[0].method; !shared { // the method's tally (batching); a split proves the provider answers ids
		c.lookups.mu.Lock()
		if len(parts) == len(batch) {
			c.lookups.proven.Store(true)
			c.lookups.tally[method] = 1
		} else if c.lookups.tally[method] <= 0 {
			c.lookups.tally[method]--
		}
		c.lookups.mu.Unlock()
	}
	wg.Wait() // this sender's requests stay bounded
}

// perTask are the classes of an answer that may be one task's, not the account's: its batch is asked ID by ID.
var perTask = map[callback.Class]bool{callback.ClassNotReady: true, callback.ClassResubmit: true,
	callback.ClassConfig: true, callback.ClassUnsupported: true, callback.ClassUnknown: true}
