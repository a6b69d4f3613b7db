package providers

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/captchaflow/captchaflow/captchaai"
	"github.com/captchaflow/captchaflow/createtask"
)

// Client is what the activities need of a provider, whatever protocol it speaks; *captchaai.Client and
// *createtask.Client both satisfy it.
type Client interface {
	Submit(ctx context.Context, method string, params map[string]string, callback string) (string, error)
	Get(ctx context.Context, taskID string) (string, error)
}

// Provider is one configured provider.
type Provider struct {
	Name     string
	Protocol string
	// Flavor is the createTask profile; "" for in.php.
	Flavor  createtask.Flavor
	Client  Client
	Threads int
}

// Supports is nil when the provider serves the method with these params, else why not; nothing is sent either way.
// An in.php provider takes every method (in.php refuses what it does not know, as it always did).
func (p *Provider) Supports(method string, params map[string]string) error {
	if p.Protocol != ProtocolCreateTask {
		return nil
	}
	return createtask.Supports(p.Flavor, method, params)
}

// PollInterval is the spacing to poll this provider at when the task asks for requested.
func (p *Provider) PollInterval(requested time.Duration) time.Duration {
	if p.Protocol != ProtocolCreateTask {
		return requested
	}
	prof, _ := createtask.ProfileOf(p.Flavor)
	return prof.PollInterval(requested)
}

// Set is the worker's providers, in order of preference, built once at start.
type Set struct {
	list []*Provider
	// Routed is false for the one-provider set made from the CAPTCHAAI_* settings: submissions then carry no
	// provider name (results and histories stay as they were) and no circuit is kept.
	Routed  bool
	Breaker *Breaker
}

// Single is the one-provider set of a worker without PROVIDERS_FILE.
func Single(name string, c Client) *Set {
	return &Set{list: []*Provider{{Name: name, Protocol: ProtocolInPHP, Client: c}}}
}

// NewSet is a routed set of ready providers, in order of preference (tests, and Build).
func NewSet(list []*Provider, b *Breaker) *Set { return &Set{list: list, Routed: true, Breaker: b} }

// Build makes the clients of a validated file. timeout bounds each request, maxCode a solved code.
func Build(f File, getenv func(string) string, timeout time.Duration, maxCode int, circuits CircuitSettings) (*Set, error) {
	set := &Set{Routed: true, Breaker: NewBreaker(circuits, time.Now)}
	for i, spec := range f.Providers {
		p := &Provider{Name: spec.Name, Protocol: spec.Protocol, Flavor: createtask.Flavor(spec.Flavor), Threads: spec.Threads}
		var err error
		key := getenv(spec.APIKeyEnv)
		if spec.Protocol == ProtocolInPHP {
			p.Client, err = captchaai.New(spec.BaseURL, key, captchaai.WithTimeout(timeout), captchaai.WithMaxCodeBytes(maxCode))
		} else {
			p.Client, err = createtask.New(p.Flavor, spec.BaseURL, key, createtask.WithTimeout(timeout), createtask.WithMaxCodeBytes(maxCode))
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

// Get is the provider named name; "" is the first (a submission made before providers were named).
func (s *Set) Get(name string) (*Provider, bool) {
	if name == "" && len(s.list) > 0 {
		return s.list[0], true
	}
	for _, p := range s.list {
		if p.Name == name {
			return p, true
		}
	}
	return nil, false
}

// Candidates are the providers a submission may go to, in the order to try them: preferred restricts and reorders
// the file's list (nil: the file's order; an unknown name is skipped), excluded are dropped, and avoided go last.
func (s *Set) Candidates(preferred, excluded, avoided []string) []*Provider {
	var order []*Provider
	if len(preferred) == 0 {
		order = slices.Clone(s.list)
	} else {
		for _, name := range preferred {
			if p, ok := s.Get(name); ok && name != "" && !slices.Contains(order, p) {
				order = append(order, p)
			}
		}
	}
	order = slices.DeleteFunc(order, func(p *Provider) bool { return slices.Contains(excluded, p.Name) })
	slices.SortStableFunc(order, func(a, b *Provider) int {
		return boolRank(slices.Contains(avoided, a.Name)) - boolRank(slices.Contains(avoided, b.Name))
	})
	return order
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}
