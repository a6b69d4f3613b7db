package server

import (
	"context"
	"sync"
	"time"
)

// untokenedJob is one accepted untokened callback waiting for its lookup and signal.
type untokenedJob struct {
	providerTaskID string
	code           string    // sent only to a workflow that does not know the untokened update
	arrived        time.Time // when the request was answered (wall clock): the lookup waits untokenedLookupDelay after it
}

// jobQueue runs untokened callbacks in the background on a fixed number of workers, so an untokened request is
// answered at once whether its task exists or not (no timing oracle), and a flood costs at most `workers`
// concurrent visibility lookups however many requests arrive. The buffer is bounded: a full queue refuses.
type jobQueue struct {
	run  func(ctx context.Context, job untokenedJob)
	jobs chan untokenedJob

	// ctx is handed to running jobs; cancelled only when a drain runs out of time.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.RWMutex // guards closed against a send on the closed channel
	closed bool
}

// newJobQueue starts workers goroutines running run on each job, with a buffer of size jobs.
func newJobQueue(size, workers int, run func(ctx context.Context, job untokenedJob)) *jobQueue {
	ctx, cancel := context.WithCancel(context.Background())
	q := &jobQueue{run: run, jobs: make(chan untokenedJob, size), ctx: ctx, cancel: cancel}
	q.wg.Add(workers)
	for range workers {
		go q.work()
	}
	return q
}

// work runs jobs until drain closes the channel, so a drain waits for every job already accepted.
func (q *jobQueue) work() {
	defer q.wg.Done()
	for job := range q.jobs {
		q.run(q.ctx, job)
	}
}

// enqueue hands job to the workers without waiting; it refuses with overloadedError when the buffer is full
// and with unavailableError once draining began.
func (q *jobQueue) enqueue(job untokenedJob) error {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return unavailable(errDraining)
	}
	select {
	case q.jobs <- job:
		return nil
	default:
		return &overloadedError{}
	}
}

// depth is the number of jobs waiting, for the queue-depth gauge.
func (q *jobQueue) depth() int { return len(q.jobs) }

// drain stops taking jobs and waits for the queued and running ones to finish. If ctx ends first, running jobs are
// cancelled (their lookups and signals return at once), jobs still queued are counted as dropped without a lookup,
// and drain returns ctx's error once the workers have stopped. Safe to call more than once.
func (q *jobQueue) drain(ctx context.Context) error {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.jobs)
	}
	q.mu.Unlock()

	done := make(chan struct{})
	go func() {
		q.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		q.cancel()
		return nil
	case <-ctx.Done():
	}
	q.cancel()
	<-done
	return ctx.Err()
}
