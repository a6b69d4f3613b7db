package activities

import (
	"context"
	"time"

	"go.temporal.io/sdk/activity"
)

// keepAlive heartbeats while an activity waits on the network, so a worker dying mid-request is noticed within the
// heartbeat timeout, not the much longer start-to-close. The returned func stops it.
func keepAlive(ctx context.Context) (stop func()) {
	every := activity.GetInfo(ctx).HeartbeatTimeout / 3
	if every <= 0 {
		return func() {}
	}
	ctx, stop = context.WithCancel(ctx)
	go func() {
		for tick := time.Tick(every); ; {
			select {
			case <-ctx.Done():
				return
			case <-tick:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return stop
}
