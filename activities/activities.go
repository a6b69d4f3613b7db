// Package activities holds the side effects of SolveCaptcha: talking to the provider and delivering the result.
// Every secret (provider key, callback and notify secrets) stays in worker memory, out of inputs, results and history.
package activities

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"

	"github.com/captchaflow/captchaflow/providers"
)

// Activities are registered on the worker as one struct so that they share the provider client and secrets.
type Activities struct {
	Provider                providers.Client // the one provider without PROVIDERS_FILE; Providers, when set, replaces it
	Providers               *providers.Set
	CallbackBaseURL         string                   // the ingress's public base
	CallbackSecret          string                   // signs the per-workflow callback URL
	NotifySecret            string                   // signs deliveries to notify_url (Standard Webhooks)
	DeliveryTimeout         time.Duration            // bounds one POST to notify_url (0: only the attempt's start-to-close)
	NotifyAllowPrivate      bool                     // deliveries may reach loopback and private addresses (development)
	CallbackTimeoutByMethod map[string]time.Duration // what Submit hands a task without callback_timeout_seconds
	ProviderThreads         int                      // PROVIDER_THREADS: provider tasks in flight per queue (0: no admission)
	Pace                    *Pacer                   // pauses an account's queue fleet-wide on rate refusals (nil: none)
	DataConverter           converter.DataConverter  // the worker client's (codec.Configure), for raw history (nil: default)

	httpOnce   sync.Once
	httpClient *http.Client
}

// keepAlive heartbeats until stopped, so a worker dying mid-request is noticed within the heartbeat timeout; a Submit's
// beats carry where it went (going), so that timeout still names the lost submission's provider and price.
func keepAlive(ctx context.Context, going ...*atomic.Pointer[LostDetails]) (stop func()) {
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
				beat(ctx, going...)
			}
		}
	}()
	return stop
}

func beat(ctx context.Context, going ...*atomic.Pointer[LostDetails]) {
	if len(going) > 0 && going[0].Load() != nil {
		activity.RecordHeartbeat(ctx, *going[0].Load())
		return
	}
	activity.RecordHeartbeat(ctx)
}
