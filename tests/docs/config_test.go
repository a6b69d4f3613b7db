package docs_test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/tests/internal/binaryenv"
)

// envName is a variable as a reference writes it: NAME, or PREFIX_<NAME> for a family.
var envName = regexp.MustCompile(`^[A-Z][A-Z0-9_]*(?:<[A-Z]+>)?$`)

// documentedEnv is what a configuration reference names: variables, and families as their prefix.
type documentedEnv struct {
	names    map[string]bool
	prefixes []string
}

func parseReference(text string) documentedEnv {
	out := documentedEnv{names: map[string]bool{}}
	for _, name := range firstColumnTokens(envName, text) {
		if prefix, _, family := strings.Cut(name, "<"); family {
			out.prefixes = append(out.prefixes, prefix)
		} else {
			out.names[name] = true
		}
	}
	return out
}

// compareEnv lists every variable read but not documented, and every one documented but not read.
func compareEnv(doc documentedEnv, read binaryenv.Env) []string {
	var problems []string
	for _, name := range read.Names() {
		if !doc.names[name] {
			problems = append(problems, fmt.Sprintf("%s is read by the processes but not in the reference", name))
		}
	}
	for _, p := range read.Prefixes {
		if !slices.Contains(doc.prefixes, p) {
			problems = append(problems, fmt.Sprintf("the family %s<NAME> is read but not in the reference", p))
		}
	}
	for name := range doc.names {
		if !read.Reads(name) {
			problems = append(problems, fmt.Sprintf("%s is in the reference but no process reads it", name))
		}
	}
	for _, p := range doc.prefixes {
		if !slices.Contains(read.Prefixes, p) {
			problems = append(problems, fmt.Sprintf("the family %s<NAME> is in the reference but not read", p))
		}
	}
	slices.Sort(problems)
	return problems
}

func binaries(t *testing.T) map[string]binaryenv.Env {
	t.Helper()
	bins, err := binaryenv.Binaries(root)
	require.NoError(t, err)
	return bins
}

// The configuration reference in operations.md names exactly what the worker, the ingress, the starter and the
// make-run launcher read: the list derived from the code that deploy's compose checks use too.
func TestConfigReferenceMatchesTheCode(t *testing.T) {
	bins := binaries(t)
	read := binaryenv.Merge(bins["worker"], bins["ingress"], bins["starter"], bins["run"])
	require.True(t, read.Reads("CALLBACK_SECRET") && read.Reads("TEMPORAL_ADDRESS"), "the derivation found nothing")
	doc := parseReference(section(t, "docs/operations.md", "Configuration reference"))
	require.Empty(t, compareEnv(doc, read))
}

// The simulator's configuration table names exactly what it reads.
func TestSimulatorReferenceMatchesTheCode(t *testing.T) {
	doc := parseReference(section(t, "tests/simulator/README.md", "Configuration (env, or the flag in brackets; flags win)"))
	require.Empty(t, compareEnv(doc, binaries(t)["simulator"]))
}

// The comparison catches a variable missing from the reference, one too many, and a missing family.
func TestCompareEnvFindsEachKindOfDrift(t *testing.T) {
	read := binaryenv.Env{Known: map[string]bool{"A_ONE": true, "A_TWO": true}, Prefixes: []string{"A_META_"}}
	doc := parseReference("| variable |\n| --- |\n| `A_ONE`, `A_GONE` | meaning `A_TWO` |\n")
	require.Equal(t, []string{
		"A_GONE is in the reference but no process reads it",
		"A_TWO is read by the processes but not in the reference",
		"the family A_META_<NAME> is read but not in the reference",
	}, compareEnv(doc, read))
	full := parseReference("| `A_ONE`, `A_TWO` |\n| `A_META_<NAME>` |\n")
	require.Empty(t, compareEnv(full, read))
}
