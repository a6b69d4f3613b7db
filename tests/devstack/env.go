package devstack

import (
	"maps"
	"os"
	"slices"
	"strings"
)

// droppedInheritedPrefixes are variables from the caller's shell a stack process must not see: the stack sets
// its own Temporal address and namespace, and a TEMPORAL_API_KEY or TLS setting meant for a real cluster would
// break the connection to the local server.
var droppedInheritedPrefixes = []string{"TEMPORAL_"}

// MergeEnv returns the caller's environment (less droppedInheritedPrefixes) with each layer applied in order;
// later layers win. The result is sorted so a process's environment is reproducible.
func MergeEnv(layers ...map[string]string) []string {
	merged := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || slices.ContainsFunc(droppedInheritedPrefixes, func(p string) bool { return strings.HasPrefix(k, p) }) {
			continue
		}
		merged[k] = v
	}
	for _, layer := range layers {
		maps.Copy(merged, layer)
	}
	env := make([]string, 0, len(merged))
	for _, k := range slices.Sorted(maps.Keys(merged)) {
		env = append(env, k+"="+merged[k])
	}
	return env
}
