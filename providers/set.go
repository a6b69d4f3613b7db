// Package providers is the Client the activities call: in.php and createTask over one HTTP scaffold, PROVIDERS_FILE, circuits.
package providers

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
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

type Provider struct {
	Name         string
	Flavor       Flavor // the createTask profile; "" for in.php
	Client       Client
	Threads      int           // the plan's concurrent tasks (PROVIDERS_FILE threads; 0: not stated)
	PollInterval time.Duration // the least spacing of one task's polls (0: none)
	Price        Price         // PROVIDERS_FILE price_per_1000
	Refunds      bool          // an unsolvable answer is not charged (the protocol's or flavor's terms)
	Rates        Rates         // the account's request budgets, shared by every worker
}

// Rates are an account's request budgets per second, each held on its own task queue by the server across workers.
type Rates struct{ Submits, Results float64 }

func (r Rates) Or(def Rates) Rates {
	return Rates{cmp.Or(r.Submits, def.Submits), cmp.Or(r.Results, def.Results)}
}

// InPHPRates: past 60 in.php requests within 3 s 2captcha bars the account for 10 s. The server lets ⌈rate⌉ through at
// once, so 3 s of dispatches hold 4 × the rate, and their arrival spreads: at 14 (56) two workers' reached 60, not at 13.
var InPHPRates = Rates{Submits: 13, Results: 14}

// DocumentedRates is the in.php account at baseURL's default budget: 2captcha's rule on 2captcha's hosts, nothing
// (not paced until it refuses) where the provider publishes no rate (CaptchaAI sells threads; a self-hosted solver).
func DocumentedRates(baseURL string) Rates {
	if u, err := url.Parse(baseURL); err == nil && (u.Hostname() == "2captcha.com" || strings.HasSuffix(u.Hostname(), ".2captcha.com")) {
		return InPHPRates
	}
	return Rates{}
}

// MaxRate bounds a configured rate (requests per second).
const MaxRate = 10000

// Set is the worker's providers, in order of preference, built once at start.
type Set struct {
	list    []*Provider
	Routed  bool // false for the one-provider set of the CAPTCHAAI_* settings: no provider names, no circuits
	Breaker *Breaker
	Model   *Model // what scored routing learned; nil: routed in order, nothing learned
}

// Single is the one-provider set of a worker without PROVIDERS_FILE.
func Single(name string, c Client) *Set { return &Set{list: []*Provider{{Name: name, Client: c}}} }

// NewSet is a routed set of ready providers, in order of preference (tests, and Build).
func NewSet(list []*Provider, b *Breaker) *Set { return &Set{list: list, Routed: true, Breaker: b} }

// Build makes the clients of a validated file; timeout bounds each request.
func Build(f File, getenv func(string) string, timeout time.Duration, circuits CircuitSettings) (*Set, error) {
	set := NewSet(nil, NewBreaker(circuits, time.Now))
	set.Model = NewModel(f)
	for i, spec := range f.Providers {
		p := &Provider{Name: spec.Name, Flavor: Flavor(spec.Flavor), Threads: spec.Threads, Price: spec.PricePer1000,
			PollInterval: time.Duration(spec.PollIntervalSeconds) * time.Second, Refunds: spec.Protocol == ProtocolInPHP,
			Rates: Rates{spec.SubmitsPerSecond, spec.ResultsPerSecond}.Or(DocumentedRates(spec.BaseURL))}
		var ct *CreateTask
		var err error
		if key := getenv(spec.APIKeyEnv); spec.Protocol == ProtocolInPHP {
			p.Client, err = NewInPHP(spec.BaseURL, key, WithTimeout(timeout))
		} else if ct, err = NewCreateTask(p.Flavor, spec.BaseURL, key, WithTimeout(timeout)); err == nil {
			p.Client, p.PollInterval = ct, max(p.PollInterval, ct.profile.MinPollInterval) // never under its documented least
			p.Refunds, p.Rates = ct.profile.RefundsUnsolvable, Rates{spec.SubmitsPerSecond, spec.ResultsPerSecond}.Or(ct.profile.Rates)
		}
		if err != nil { // the message names the URL (redacted) or the flavor, never the key
			return nil, fmt.Errorf("providers[%d] (%s): %w", i, spec.Name, err)
		}
		set.list = append(set.list, p)
	}
	return set, nil
}

func (s *Set) All() []*Provider { return s.list }

// Get is the provider named name; "" is the first (the one provider of a worker without PROVIDERS_FILE).
func (s *Set) Get(name string) (*Provider, bool) {
	i := slices.IndexFunc(s.list, func(p *Provider) bool { return p.Name == name || name == "" })
	if i < 0 {
		return nil, false
	}
	return s.list[i], true
}

// Candidates are where a submission may go: preferred restricts and reorders, excluded drop, avoided go last (latest last).
func (s *Set) Candidates(preferred, excluded, avoided []string) []*Provider {
	out := slices.DeleteFunc(slices.Clone(s.list), func(p *Provider) bool {
		return slices.Contains(excluded, p.Name) || len(preferred) > 0 && !slices.Contains(preferred, p.Name)
	})
	slices.SortStableFunc(out, func(a, b *Provider) int { // Index: -1 unless avoided
		return cmp.Or(cmp.Compare(slices.Index(avoided, a.Name), slices.Index(avoided, b.Name)),
			cmp.Compare(slices.Index(preferred, a.Name), slices.Index(preferred, b.Name)))
	})
	return out
}

const ProtocolInPHP, ProtocolCreateTask = "inphp", "createtask"

// MaxThreads bounds a plan: its semaphore carries every holder across continue-as-new, under Temporal's 2 MB limit.
const MaxThreads = 5000

// File is PROVIDERS_FILE: the routing policy and its knobs, and the providers, in order of preference.
type File struct {
	Routing           string   `yaml:"routing"`
	ExploreShare      *float64 `yaml:"explore_share"`
	Memory            int      `yaml:"memory"`
	PriorSolveSeconds int      `yaml:"prior_solve_seconds"`
	Providers         []Spec   `yaml:"providers"`
}

type Spec struct {
	Name                string  `yaml:"name"`
	Protocol            string  `yaml:"protocol"`
	Flavor              string  `yaml:"flavor"`
	BaseURL             string  `yaml:"base_url"`
	APIKeyEnv           string  `yaml:"api_key_env"`
	Threads             int     `yaml:"threads"`
	PollIntervalSeconds int     `yaml:"poll_interval_seconds"` // never under the flavor's documented least
	PricePer1000        Price   `yaml:"price_per_1000"`
	SubmitsPerSecond    float64 `yaml:"submits_per_second"` // 0: the provider's documented budget, if it has one
	ResultsPerSecond    float64 `yaml:"results_per_second"`
}

// ParseFile validates a providers file, every problem at once, each naming its field; of a key, only whether it is set.
func ParseFile(content []byte, getenv func(string) string) (File, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(content))
	dec.KnownFields(true) // a field the code does not use is refused, not ignored
	if err := dec.Decode(&f); err != nil {
		return File{}, fmt.Errorf("not a providers file: %w", err)
	}
	var errs []error
	at := "" // the field's prefix: a provider's "providers[i]."
	bad := func(bad bool, field, why string) {
		if bad {
			errs = append(errs, fmt.Errorf("%s%s: %s", at, field, why))
		}
	}
	bad(!slices.Contains([]string{"", RoutingOrder, RoutingScored}, f.Routing), "routing", "must be "+RoutingOrder+" or "+RoutingScored)
	bad(f.ExploreShare != nil && !(*f.ExploreShare >= 0 && *f.ExploreShare <= 0.5), "explore_share", "must be from 0 to 0.5")
	bad(f.Memory < 0 || f.Memory == 1 || f.Memory > 1000, "memory", "must be from 2 to 1000 observations")
	bad(f.PriorSolveSeconds < 0 || f.PriorSolveSeconds > 3600, "prior_solve_seconds", "must be from 0 to 3600")
	bad(len(f.Providers) == 0 || len(f.Providers) > captchaflow.MaxProviders, "providers", fmt.Sprintf("1 to %d providers", captchaflow.MaxProviders))
	for i, s := range f.Providers {
		inphp, key := s.Protocol == ProtocolInPHP, s.APIKeyEnv
		at = fmt.Sprintf("providers[%d].", i)
		bad(!captchaflow.ProviderNamePattern.MatchString(s.Name), "name", "must match "+captchaflow.ProviderNamePattern.String())
		bad(slices.ContainsFunc(f.Providers[:i], func(o Spec) bool { return o.Name == s.Name }), "name", strconv.Quote(s.Name)+" is used twice")
		bad(!inphp && s.Protocol != ProtocolCreateTask, "protocol", "must be "+ProtocolInPHP+" or "+ProtocolCreateTask)
		bad(inphp && s.Flavor != "", "flavor", "only for protocol "+ProtocolCreateTask)
		bad(inphp && s.BaseURL == "", "base_url", "required for protocol "+ProtocolInPHP)
		bad(s.Protocol == ProtocolCreateTask && !slices.Contains(Flavors, Flavor(s.Flavor)), "flavor", fmt.Sprint("must be one of ", Flavors))
		bad(key == "", "api_key_env", "required: the name of the environment variable holding the key (never the key itself)")
		bad(key != "" && !envName.MatchString(key), "api_key_env", "must be an environment variable's name")
		bad(envName.MatchString(key) && strings.TrimSpace(getenv(key)) == "", "api_key_env", key+" is not set or empty")
		bad(s.Threads < 0 || s.Threads > MaxThreads, "threads", fmt.Sprint("must be from 0 to ", MaxThreads))
		bad(s.PollIntervalSeconds < 0, "poll_interval_seconds", "must not be negative")
		bad(!(s.SubmitsPerSecond >= 0 && s.SubmitsPerSecond <= MaxRate), "submits_per_second", fmt.Sprint("must be from 0 (the default) to ", MaxRate))
		bad(!(s.ResultsPerSecond >= 0 && s.ResultsPerSecond <= MaxRate), "results_per_second", fmt.Sprint("must be from 0 (the default) to ", MaxRate))
		for m, v := range s.PricePer1000 {
			bad(!(v >= 0 && v < 1e6), "price_per_1000."+m, "must be a number of USD from 0 to 1000000")
		}
		if _, ok := s.PricePer1000["default"]; f.Routing == RoutingScored && !ok { // unpriced would be free: the cheapest
			unpriced := slices.DeleteFunc(Methods(Flavor(s.Flavor)), func(m string) bool { _, ok := s.PricePer1000[m]; return ok })
			bad(inphp, "price_per_1000.default", "required under routing: scored (an in.php provider serves every method)")
			bad(!inphp && len(unpriced) > 0, "price_per_1000", "no price for "+strings.Join(unpriced, ", ")+
				" (methods its flavor serves) under routing: scored: price them or set default")
		}
	}
	return f, errors.Join(errs...)
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
