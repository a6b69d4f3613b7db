package devstack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"go.yaml.in/yaml/v3"

	"github.com/captchaflow/captchaflow/providers"
)

// providerKeyEnv is the variable the providers file names for every simulator's key (they share the stack's key).
const providerKeyEnv = "DEVSTACK_PROVIDER_KEY"

// SimProvider is one simulated provider of a routed stack (Options.Providers): a simulator process of its own,
// named in the worker's PROVIDERS_FILE.
type SimProvider struct {
	// Name is the provider's name in the file, results and metrics ([a-z0-9-]+).
	Name string
	// Protocol is providers.ProtocolInPHP or providers.ProtocolCreateTask; Flavor the createTask profile.
	Protocol string
	Flavor   string
	// Port on 127.0.0.1; zero means a free one. The first provider uses Options.SimulatorPort instead.
	Port int
	// Env adds to this simulator's environment (after Options.SimulatorEnv for the first).
	Env map[string]string
}

// routed tells whether the worker gets a PROVIDERS_FILE naming the simulators.
func (s *Stack) routed() bool { return s.useSim && len(s.opts.Providers) > 0 }

// resolveProviders gives every provider after the first a port; the first is the main simulator.
func resolveProviders(opts *Options) error {
	if len(opts.Providers) == 0 {
		return nil
	}
	if opts.ProviderBaseURL != "" || opts.ProviderAPIKey != "" {
		return errors.New("devstack: Options.Providers are simulators: leave ProviderBaseURL and ProviderAPIKey empty")
	}
	opts.Providers[0].Port = opts.SimulatorPort
	for i := range opts.Providers[1:] {
		p := &opts.Providers[i+1]
		var err error
		if p.Port, err = freePortIfZero(p.Port); err != nil {
			return err
		}
	}
	return nil
}

// providerSimEnv is the environment of the simulator of provider i.
func (s *Stack) providerSimEnv(i int) map[string]string {
	p := s.opts.Providers[i]
	env := map[string]string{"SIM_PROTOCOL": p.Protocol, "SIM_FLAVOR": p.Flavor}
	if i == 0 {
		return mergeMaps(env, s.opts.SimulatorEnv, p.Env)
	}
	return mergeMaps(env, p.Env)
}

// mergeMaps merges maps, later ones winning, into a new map.
func mergeMaps(layers ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, l := range layers {
		for k, v := range l {
			out[k] = v
		}
	}
	return out
}

// startExtraSimulators starts the simulator of every provider after the first, each waited for by /healthz.
func (s *Stack) startExtraSimulators(ctx context.Context) error {
	for i, p := range s.opts.Providers {
		if i == 0 {
			continue
		}
		env := mergeMaps(map[string]string{"SIM_ADDR": loopback(p.Port), "SIM_API_KEYS": s.opts.ProviderAPIKey}, s.providerSimEnv(i))
		slot := new(*Process)
		if err := s.startComponent(ctx, slot, "simulator-"+p.Name, s.bins.Simulator, env, nil, s.ProviderSimulatorURL(p.Name)+"/healthz"); err != nil {
			return err
		}
		s.mu.Lock()
		s.extraSims = append(s.extraSims, *slot)
		s.mu.Unlock()
	}
	return nil
}

// writeProvidersFile writes the worker's PROVIDERS_FILE into the run directory and returns the worker's
// environment for it (the file, and the key under the name the file gives).
func (s *Stack) writeProvidersFile() (map[string]string, error) {
	return s.WriteProvidersFile("providers.yaml", providers.File{}, nil)
}

// WriteProvidersFile writes a PROVIDERS_FILE naming the simulators into the run directory as name, with base's
// routing settings and the prices (USD per 1 000, by provider name), and returns a worker's environment for it.
func (s *Stack) WriteProvidersFile(name string, base providers.File, prices map[string]float64) (map[string]string, error) {
	f := base
	for _, p := range s.opts.Providers {
		f.Providers = append(f.Providers, providers.Spec{Name: p.Name, Protocol: p.Protocol, Flavor: p.Flavor,
			BaseURL: s.ProviderSimulatorURL(p.Name), APIKeyEnv: providerKeyEnv})
		if price, ok := prices[p.Name]; ok {
			f.Providers[len(f.Providers)-1].PricePer1000 = providers.Price{"default": price}
		}
	}
	content, err := yaml.Marshal(f)
	if err != nil {
		return nil, err
	}
	if _, err := providers.ParseFile(content, func(string) string { return "set" }); err != nil {
		return nil, fmt.Errorf("devstack: Options.Providers: %w", err)
	}
	path := filepath.Join(s.opts.RunDir, name)
	if err := os.WriteFile(path, content, 0o600); err != nil {
		return nil, err
	}
	return map[string]string{"PROVIDERS_FILE": path, providerKeyEnv: s.opts.ProviderAPIKey}, nil
}

// ProviderSimulatorURL is the base URL of the named provider's simulator ("" for a name not in Options.Providers).
func (s *Stack) ProviderSimulatorURL(name string) string {
	for _, p := range s.opts.Providers {
		if p.Name == name {
			return "http://" + loopback(p.Port)
		}
	}
	return ""
}

// ProviderSimulator is the named provider's simulator process (nil until started, or for an unknown name).
func (s *Stack) ProviderSimulator(name string) *Process {
	for i, p := range s.opts.Providers {
		if p.Name != name {
			continue
		}
		if i == 0 {
			return s.Simulator()
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if i-1 < len(s.extraSims) {
			return s.extraSims[i-1]
		}
	}
	return nil
}

// Providers are the routed stack's simulated providers, in the file's order (empty on a one-provider stack).
func (s *Stack) Providers() []SimProvider { return s.opts.Providers }
