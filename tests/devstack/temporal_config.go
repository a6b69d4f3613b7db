package devstack

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/template"
)

//go:embed temporal-sqlite.yaml
var serverConfigTemplate string

// defaultDynamicConfig is what the CLI's dev server set, plus one task-queue partition: with a handful of
// pollers, the default four partitions add multi-second tail latency to task dispatch.
var defaultDynamicConfig = map[string]string{
	"matching.numTaskqueueReadPartitions":  "1",
	"matching.numTaskqueueWritePartitions": "1",
	// Submits queued on a provider's paced queue are served fairly by caller (the Submit's fairness key).
	"matching.enableFairness": "true",
	// Search attributes registered at start are usable at once; the persistence QPS is raised to match.
	"system.forceSearchAttributesCacheRefreshOnRead": "true",
	"frontend.persistenceMaxQPS":                     "10000",
	"history.persistenceMaxQPS":                      "45000",
	"history.hostLevelCacheMaxSize":                  "8096",
	"frontend.namespaceRPS.visibility":               "100",
	// The namespace registered at start is served within a second.
	"system.namespaceCacheRefreshInterval": `"1s"`,
}

// internalPorts are the history, matching and worker services' ports and the four membership ports. They are
// kept beside the SQLite file and reused: the server looks for the members it last recorded there, and a member
// on a port that changed would be waited for.
type internalPorts struct {
	History, Matching, Worker                                                   int
	FrontendMembership, HistoryMembership, MatchingMembership, WorkerMembership int
}

func (p *internalPorts) all() []*int {
	return []*int{&p.History, &p.Matching, &p.Worker, &p.FrontendMembership, &p.HistoryMembership, &p.MatchingMembership, &p.WorkerMembership}
}

// loadInternalPorts reuses the ports recorded in file while all of them are free, else picks and records new ones.
func loadInternalPorts(file string, fresh bool) (internalPorts, error) {
	var p internalPorts
	if data, err := os.ReadFile(file); err == nil && !fresh && json.Unmarshal(data, &p) == nil && allFree(p.all()) {
		return p, nil
	}
	for _, port := range p.all() {
		var err error
		if *port, err = FreePort(); err != nil {
			return p, err
		}
	}
	data, err := json.Marshal(p)
	if err != nil {
		return p, err
	}
	return p, os.WriteFile(file, data, 0o644)
}

func allFree(ports []*int) bool {
	for _, port := range ports {
		l, err := net.Listen("tcp", loopback(*port))
		if *port == 0 || err != nil {
			return false
		}
		l.Close()
	}
	return true
}

// writeServerConfig renders the server's config and dynamic config beside its log and returns the config's path.
func writeServerConfig(opts TemporalOptions, freshPorts bool) (string, error) {
	internal, err := loadInternalPorts(opts.DBFile+".ports.json", freshPorts)
	if err != nil {
		return "", fmt.Errorf("temporal internal ports: %w", err)
	}
	dir := filepath.Dir(opts.LogPath)
	dynamicFile := filepath.Join(dir, "temporal-dynamicconfig.yaml")
	overrides := nexusDynamicConfig(opts.HTTPPort)
	maps.Copy(overrides, opts.DynamicConfig)
	if err := os.WriteFile(dynamicFile, []byte(dynamicConfigYAML(overrides)), 0o644); err != nil {
		return "", err
	}
	var out strings.Builder
	err = template.Must(template.New("server").Parse(serverConfigTemplate)).Execute(&out, map[string]any{
		"DBFile": opts.DBFile, "Port": opts.Port, "HTTPPort": opts.HTTPPort, "MetricsPort": opts.MetricsPort,
		"Internal": internal, "DynamicConfigFile": dynamicFile,
	})
	if err != nil {
		return "", err
	}
	configFile := filepath.Join(dir, "temporal-server.yaml")
	return configFile, os.WriteFile(configFile, []byte(out.String()), 0o644)
}

// dynamicConfigYAML is defaultDynamicConfig with overrides applied, in the server's file format (a JSON value is
// a YAML value).
func dynamicConfigYAML(overrides map[string]string) string {
	dynamic := maps.Clone(defaultDynamicConfig)
	maps.Copy(dynamic, overrides)
	var b strings.Builder
	for _, key := range slices.Sorted(maps.Keys(dynamic)) {
		fmt.Fprintf(&b, "%s:\n  - value: %s\n", key, dynamic[key])
	}
	return b.String()
}
