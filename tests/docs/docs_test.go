// Package docs_test keeps the documents true to the code: links and anchors resolve, the configuration reference
// names exactly the variables the processes read, the contract names every failure type, the operations page
// every alert and metric, and the README's Go example compiles. The CLI examples run against the e2e stack
// (tests/docs_cli_test.go).
package docs_test

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/captchaflow/captchaflow/tests/internal/docscheck"
)

// root is the repository's (the product module's) root, where every document path below starts.
const root = "../.."

// documents are the markdown files whose links are checked: every docs/*.md and the READMEs.
func documents(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	require.NotEmpty(t, docs)
	out := []string{"README.md", "tests/bench/README.md", "tests/simulator/README.md", "deploy/README.md"}
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		require.NoError(t, err)
		out = append(out, rel)
	}
	return out
}

func read(t *testing.T, name string) string {
	t.Helper()
	text, err := docscheck.ReadFile(root, name)
	require.NoError(t, err)
	return text
}

func section(t *testing.T, name, heading string) string {
	t.Helper()
	text, err := docscheck.Section(read(t, name), heading)
	require.NoError(t, err, name)
	return text
}

func TestLinksAndAnchorsResolve(t *testing.T) {
	problems, err := docscheck.BrokenLinks(root, documents(t))
	require.NoError(t, err)
	require.Empty(t, problems)
}

// backticked finds `NAME` tokens of one shape in a piece of markdown.
func backticked(shape *regexp.Regexp, text string) []string {
	var out []string
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(text, -1) {
		if shape.MatchString(m[1]) {
			out = append(out, m[1])
		}
	}
	return out
}

// firstColumnTokens are the backticked tokens of one shape in the first column of the tables in text.
func firstColumnTokens(shape *regexp.Regexp, text string) []string {
	return backticked(shape, strings.Join(docscheck.FirstColumn(text), "\n"))
}

// Every failure type the contract declares is a row of a failures table in contract.md.
func TestContractNamesEveryFailureType(t *testing.T) {
	types := failureTypes(t)
	require.GreaterOrEqual(t, len(types), 11, "contract.go's Failure… constants were not all found")
	documented := firstColumnTokens(regexp.MustCompile(`^[A-Z][A-Za-z]+$`), read(t, "docs/contract.md"))
	for _, typ := range types {
		require.Contains(t, documented, typ, "docs/contract.md has no failures-table row for %s", typ)
	}
}

// Every alert in alerts.yml is a row of the alerts table, and every row is an alert.
func TestOperationsNamesEveryAlert(t *testing.T) {
	rules := read(t, "deploy/prometheus/alerts.yml")
	var alerts []string
	for _, m := range regexp.MustCompile(`(?m)^\s*- alert:\s*(\S+)`).FindAllStringSubmatch(rules, -1) {
		alerts = append(alerts, m[1])
	}
	require.NotEmpty(t, alerts)
	documented := firstColumnTokens(regexp.MustCompile(`^Captchaflow[A-Za-z]+$`), section(t, "docs/operations.md", "Alerts"))
	slices.Sort(alerts)
	slices.Sort(documented)
	require.Equal(t, alerts, documented, "the alerts table of docs/operations.md and deploy/prometheus/alerts.yml")
}

// Every captchaflow_ metric the worker's packages declare is in the metrics tables.
func TestOperationsNamesEveryWorkerMetric(t *testing.T) {
	metrics := metricNames(t, "workflows", "activities", "worker")
	require.GreaterOrEqual(t, len(metrics), 10, "the metric names were not found in the code")
	documented := firstColumnTokens(regexp.MustCompile(`^captchaflow_`), section(t, "docs/operations.md", "Metrics"))
	var names []string
	for _, d := range documented {
		for n := range strings.SplitSeq(d, ",") {
			name, _, _ := strings.Cut(strings.TrimSpace(n), "{")
			names = append(names, name)
		}
	}
	for _, m := range metrics {
		require.Contains(t, names, m, "docs/operations.md's metrics tables do not name %s", m)
	}
}

// Every `make TARGET` in the documents' code is a target of the Makefile.
func TestDocumentedMakeTargetsExist(t *testing.T) {
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([a-z0-9-]+):`).FindAllStringSubmatch(read(t, "Makefile"), -1) {
		targets[m[1]] = true
	}
	require.True(t, targets["run"] && targets["test"], "Makefile targets not found")
	for _, name := range documents(t) {
		for _, target := range makeTargets(read(t, name)) {
			require.True(t, targets[target], "%s names `make %s`, which the Makefile does not have", name, target)
		}
	}
}

// makeTargets finds `make X` at the start of a code span or of a line in a code block.
func makeTargets(text string) []string {
	prose := map[int]bool{}
	for _, l := range docscheck.Prose(text) {
		prose[l.N] = true
	}
	span := regexp.MustCompile("`make ([a-z][a-z0-9-]*)")
	line := regexp.MustCompile(`^\s*make ([a-z][a-z0-9-]*)`)
	var out []string
	for i, l := range strings.Split(text, "\n") {
		for _, m := range span.FindAllStringSubmatch(l, -1) {
			out = append(out, m[1])
		}
		if m := line.FindStringSubmatch(l); m != nil && !prose[i+1] {
			out = append(out, m[1])
		}
	}
	return out
}
