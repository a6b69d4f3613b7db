// Package activities holds the side effects of SolveCaptcha: talking to the provider and delivering the result.
// Everything secret (the provider key, the callback secret, the notify secret) lives here, in worker memory, and
// is never passed through activity inputs or results, so it never reaches workflow history.
package activities

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/captchaflow/captchaflow/internal/providers"
)

// Provider is the part of the CaptchaAI client the activities use; *captchaai.Client satisfies it.
type Provider interface {
	Submit(ctx context.Context, method string, params map[string]string, pingback string) (string, error)
	Get(ctx context.Context, taskID string) (string, error)
}

// Activities are registered on the worker as one struct so that they share the provider client and secrets.
type Activities struct {
	// Provider is the one provider of a worker without PROVIDERS_FILE; Providers, when set, replaces it.
	Provider           Provider
	Providers          *providers.Set
	CallbackBaseURL    string        // the ingress's public base
	CallbackSecret     string        // signs the pingback URLs
	NotifySecret       string        // signs deliveries to notify_url (Standard Webhooks)
	DeliveryTimeout    time.Duration // bounds one POST to notify_url (default DefaultDeliveryTimeout)
	NotifyAllowPrivate bool          // lets deliveries reach private addresses (local development, the demo)
	// CallbackTimeoutByMethod (CALLBACK_TIMEOUT_BY_METHOD) is the callback timeout of a task that leaves it unset.
	CallbackTimeoutByMethod map[string]time.Duration
	// ProviderThreads is PROVIDER_THREADS (0: no admission control); AcquireSlot states it to the semaphore.
	ProviderThreads int

	httpOnce   sync.Once
	httpClient *http.Client
	slotsOnce  sync.Once
	slots      *slotClient
}

// DefaultDeliveryTimeout bounds one POST to notify_url when Activities.DeliveryTimeout is zero.
const DefaultDeliveryTimeout = 15 * time.Second

// Activity names as registered (method names); the workflow refers to them through method values.
const (
	SubmitName  = "Submit"
	PollName    = "Poll"
	DeliverName = "Deliver"
)
