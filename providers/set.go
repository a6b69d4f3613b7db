// Package providers is the one provider layer: the Client the activities call, in.php (InPHP) and createTask
// (CreateTask) over one HTTP scaffold deciding "outcome unknown", redaction and typed errors, PROVIDERS_FILE, circuits.
package providers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/captchaflow/captchaflow"
)

// Client is what the activities call on a provider, whatever its protocol; every error is an *Error.
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
	Name         string
	Flavor       Flavor // the createTask profile; "" for in.php
	Client       Client
	Threads      int           // the plan's concurrent tasks (PROVIDERS_FILE threads; 0: not stated)
	PollInterval time.Duration // the least spacing of one task's polls (0: none)
}

// Set is the worker's providers, in order of preference, built once at start.
type Set struct {
	list []*Provider
	// Routed is false for the one-provider set of the CAPTCHAAI_* settings: no provider names, no circuits.
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
		if err != nil { // the message names the URL (redacted) or the flavor, never the key
			return nil, fmt.Errorf("providers[%d] (%s): %w", i, spec.Name, err)
		}
		set.list = append(set.list, p)
	}
	return set, nil
}

// All are the providers in the file's order.
func (s *Set) All() []*Provider { return s.list }

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

// Candidates are the providers a submission may go to, in order: preferred restricts and reorders the file's list
// (an unknown name is skipped), excluded are dropped, avoided go last.
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

// Protocols a provider may speak.
const (
	ProtocolInPHP      = "inphp"
	ProtocolCreateTask = "createtask"
)

// File is PROVIDERS_FILE: the providers, in order of preference.
type File struct {
	Providers []Spec `yaml:"providers"`
}

// Spec is one provider of the file.
type Spec struct {
	Name      string `yaml:"name"`
	Protocol  string `yaml:"protocol"`
	Flavor    string `yaml:"flavor"`
	BaseURL   string `yaml:"base_url"`
	APIKeyEnv string `yaml:"api_key_env"`
	Threads   int    `yaml:"threads"`
	// PollIntervalSeconds: the least spacing of one task's polls, never under the flavor's documented least.
	PollIntervalSeconds int `yaml:"poll_interval_seconds"`
}

// ParseFile reads and validates a providers file, every problem at once, each naming its field (providers[1].flavor);
// of an API key it reads only whether its variable is set.
func ParseFile(content []byte, getenv func(string) string) (File, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(content))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return File{}, fmt.Errorf("not a providers file: %w", err)
	}
	var errs []error
	if len(f.Providers) == 0 {
		errs = append(errs, errors.New("providers: at least one provider is required"))
	}
	if len(f.Providers) > captchaflow.MaxProviders {
		errs = append(errs, fmt.Errorf("providers: at most %d providers", captchaflow.MaxProviders))
	}
	seen := map[string]bool{}
	for i, spec := range f.Providers {
		errs = append(errs, spec.validate(fmt.Sprintf("providers[%d]", i), getenv)...)
		if seen[spec.Name] {
			errs = append(errs, fmt.Errorf("providers[%d].name: %q is used twice", i, spec.Name))
		}
		seen[spec.Name] = true
	}
	return f, errors.Join(errs...)
}

// validate checks one provider; at names it in the messages.
func (s Spec) validate(at string, getenv func(string) string) []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s.%s: %s", at, field, fmt.Sprintf(format, args...)))
	}
	if !captchaflow.ProviderNamePattern.MatchString(s.Name) {
		bad("name", "must match %s", captchaflow.ProviderNamePattern)
	}
	switch s.Protocol {
	case ProtocolInPHP:
		if s.Flavor != "" {
			bad("flavor", "only for protocol %s", ProtocolCreateTask)
		}
		if s.BaseURL == "" {
			bad("base_url", "required for protocol %s", ProtocolInPHP)
		}
	case ProtocolCreateTask:
		if !slices.Contains(Flavors, Flavor(s.Flavor)) {
			bad("flavor", "must be one of %v", Flavors)
		}
	default:
		bad("protocol", "must be %s or %s", ProtocolInPHP, ProtocolCreateTask)
	}
	switch {
	case s.APIKeyEnv == "":
		bad("api_key_env", "required: the name of the environment variable holding the key (never the key itself)")
	case !envName.MatchString(s.APIKeyEnv):
		bad("api_key_env", "must be an environment variable's name")
	case strings.TrimSpace(getenv(s.APIKeyEnv)) == "":
		bad("api_key_env", "%s is not set or empty", s.APIKeyEnv)
	}
	if s.Threads < 0 {
		bad("threads", "must not be negative")
	}
	if s.PollIntervalSeconds < 0 {
		bad("poll_interval_seconds", "must not be negative")
	}
	return errs
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// ReadFile is ParseFile of the file at path; errors are prefixed with PROVIDERS_FILE.
func ReadFile(path string, getenv func(string) string) (File, error) {
	content, err := os.ReadFile(path)
	if err != nil {
		return File{}, fmt.Errorf("PROVIDERS_FILE: %w", err)
	}
	f, err := ParseFile(content, getenv)
	if err != nil {
		return File{}, fmt.Errorf("PROVIDERS_FILE %s: %w", path, err)
	}
	return f, nil
}
