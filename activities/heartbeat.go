package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
)

// keepAlive heartbeats while an activity waits on the network, so that a worker dying mid-request is noticed
// within the heartbeat timeout instead of the much longer start-to-close timeout. Requests that finish before the
// first tick send nothing. The returned func stops it.
func keepAlive(ctx context.Context) (stop func()) {
	return keepAliveEvery(ctx, activity.GetInfo(ctx).HeartbeatTimeout/3)
}

func keepAliveEvery(ctx context.Context, every time.Duration) (stop func()) {
	if every <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() { close(done) }
}
