// Package providers is the one provider layer: the Client interface the activities call, its two protocols (in.php
// / res.php: InPHP; createTask: CreateTask) over one HTTP scaffold (http.go) that decides "outcome unknown",
// redaction and typed errors for both, PROVIDERS_FILE, and the circuits routing reads. Without the file the
// CAPTCHAAI_* settings make a one-provider set that routes nothing.
package providers

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/captchaflow/captchaflow"
)

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
	// PollIntervalSeconds is the least spacing of one task's polls, never under the flavor's documented least.
	PollIntervalSeconds int `yaml:"poll_interval_seconds"`
}

// ParseFile reads and validates a providers file's content. Every problem is reported at once, each naming its
// field (providers[1].flavor); an API key's value is never read here, only whether its variable is set.
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
