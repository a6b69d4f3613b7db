package providers

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Client is the one interface the activities call on a provider, whatever protocol it speaks: *InPHP and
// *CreateTask satisfy it. Every error is an *Error (see OutcomeUnknown, ClassOf).
type Client interface {
	// Supports is nil when the provider serves the method with these params, else why not; nothing is sent.
	Supports(method string, params map[string]string) error
	// Submit creates the task with callbackURL as its pingback; code is set when the answer carried the solution.
	Submit(ctx context.Context, method string, params map[string]string, callbackURL string) (id, code string, err error)
	// Get asks once for the task's solution; a task still being solved is a ClassNotReady error.
	Get(ctx context.Context, taskID string) (string, error)
	Balance(ctx context.Context) (float64, error)
	// Report sends a verdict on a task of kind (createTask's report calls depend on it; in.php's do not).
	Report(ctx context.Context, kind Kind, taskID string, good bool) error
}

// Provider is one configured provider.
type Provider struct {
	Name string
	// Flavor is the createTask profile; "" for in.php.
	Flavor Flavor
	Client Client
	// Threads is the plan's concurrent tasks (PROVIDERS_FILE threads; 0: not stated).
	Threads int
	// PollInterval is the least spacing of one task's polls (0: none).
	PollInterval time.Duration
}

// Set is the worker's providers, in order of preference, built once at start.
type Set struct {
	list []*Provider
	// Routed is false for the one-provider set made from the CAPTCHAAI_* settings: submissions then carry no
	// provider name and no circuit is kept.
	Routed  bool
	Breaker *Breaker
}

// Single is the one-provider set of a worker without PROVIDERS_FILE.
func Single(name string, c Client) *Set { return &Set{list: []*Provider{{Name: name, Client: c}}} }

// NewSet is a routed set of ready providers, in order of preference (tests, and Build).
func NewSet(list []*Provider, b *Breaker) *Set { return &Set{list: list, Routed: true, Breaker: b} }

// Build makes the clients of a validated file; timeout bounds each request.
func Build(f File, getenv func(string) string, timeout time.Duration, circuits CircuitSettings) (*Set, error) {
	set := NewSet(nil, NewBreaker(circuits, time.Now))
	opts := []Option{WithTimeout(timeout)}
	for i, spec := range f.Providers {
		p := &Provider{Name: spec.Name, Flavor: Flavor(spec.Flavor), Threads: spec.Threads,
			PollInterval: time.Duration(spec.PollIntervalSeconds) * time.Second}
		var err error
		if key := getenv(spec.APIKeyEnv); spec.Protocol == ProtocolInPHP {
			p.Client, err = NewInPHP(spec.BaseURL, key, opts...)
		} else {
			var ct *CreateTask
			ct, err = NewCreateTask(p.Flavor, spec.BaseURL, key, opts...)
			p.Client = ct
			if err == nil { // never more often than the provider documents
				p.PollInterval = max(p.PollInterval, ct.profile.MinPollInterval)
			}
		}
		if err != nil {
			// The clients' messages name the URL (redacted) or the flavor, never the key.
			return nil, fmt.Errorf("providers[%d] (%s): %w", i, spec.Name, err)
		}
		set.list = append(set.list, p)
	}
	return set, nil
}

// All are the providers in the file's order.
func (s *Set) All() []*Provider { return s.list }

// Names are the providers' names in the file's order.
func (s *Set) Names() []string {
	out := make([]string, 0, len(s.list))
	for _, p := range s.list {
		out = append(out, p.Name)
	}
	return out
}

// Get is the provider named name; "" is the first (the one provider of a worker without PROVIDERS_FILE).
func (s *Set) Get(name string) (*Provider, bool) {
	if name == "" && len(s.list) > 0 {
		return s.list[0], true
	}
	i := slices.IndexFunc(s.list, func(p *Provider) bool { return p.Name == name })
	if i < 0 {
		return nil, false
	}
	return s.list[i], true
}

// Candidates are the providers a submission may go to, in the order to try them: preferred restricts and reorders
// the file's list (nil: the file's order; an unknown name is skipped), excluded are dropped, and avoided go last.
func (s *Set) Candidates(preferred, excluded, avoided []string) []*Provider {
	order := slices.Clone(s.list)
	if len(preferred) > 0 {
		order = nil
		for _, name := range preferred {
			if p, ok := s.Get(name); ok && name != "" && !slices.Contains(order, p) {
				order = append(order, p)
			}
		}
	}
	order = slices.DeleteFunc(order, func(p *Provider) bool { return slices.Contains(excluded, p.Name) })
	avoid := func(p *Provider) int {
		if slices.Contains(avoided, p.Name) {
			return 1
		}
		return 0
	}
	slices.SortStableFunc(order, func(a, b *Provider) int { return avoid(a) - avoid(b) })
	return order
}
