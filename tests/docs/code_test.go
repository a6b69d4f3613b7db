package docs_test

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// failureTypes are the values of the Failure… constants of the root package's contract.go.
func failureTypes(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, "contract.go"), nil, 0)
	require.NoError(t, err)
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		spec, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range spec.Names {
			if !strings.HasPrefix(name.Name, "Failure") || i >= len(spec.Values) {
				continue
			}
			if lit, ok := spec.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				v, err := strconv.Unquote(lit.Value)
				require.NoError(t, err)
				out = append(out, v)
			}
		}
		return true
	})
	return out
}

// metricName is a Prometheus metric name of ours, as a whole string literal.
var metricName = regexp.MustCompile(`^captchaflow_[a-z0-9_]+$`)

// metricNames are the string literals shaped like one of our metric names in the packages' non-test files.
func metricNames(t *testing.T, dirs ...string) []string {
	t.Helper()
	seen := map[string]bool{}
	var out []string
	for _, dir := range dirs {
		entries, err := os.ReadDir(filepath.Join(root, dir))
		require.NoError(t, err)
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, dir, e.Name()), nil, 0)
			require.NoError(t, err)
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				if v, err := strconv.Unquote(lit.Value); err == nil && metricName.MatchString(v) && !seen[v] {
					seen[v] = true
					out = append(out, v)
				}
				return true
			})
		}
	}
	return out
}

// Every query of the Grafana dashboard names metrics the worker exports (a histogram's series by its timer's
// name), and it shows each of the routing model's: price, spend, solve time, unsolvable and bad shares, the split;
// and the Nexus operations' (issue 39).
func TestGrafanaDashboardQueriesExportedMetrics(t *testing.T) {
	exported := metricNames(t, ".", "workflows", "activities", "worker")
	check := func(dashboard string) error {
		var d struct {
			Panels []struct {
				Targets []struct{ Expr string } `json:"targets"`
			} `json:"panels"`
		}
		if err := json.Unmarshal([]byte(dashboard), &d); err != nil {
			return err
		}
		var queried []string
		for _, p := range d.Panels {
			for _, q := range p.Targets {
				for _, name := range regexp.MustCompile(`captchaflow_[a-z0-9_]+`).FindAllString(q.Expr, -1) {
					if base := strings.TrimSuffix(name, "_bucket"); !slices.Contains(exported, name) && !slices.Contains(exported, base) {
						return fmt.Errorf("the query %q names %s, which the worker does not export", q.Expr, name)
					}
					queried = append(queried, name)
				}
			}
		}
		for _, want := range []string{"captchaflow_provider_price_usd", "captchaflow_provider_spend_microusd_total", "captchaflow_route_solve_p90_seconds",
			"captchaflow_route_unsolvable_share", "captchaflow_route_bad_share", "captchaflow_route_expected_cost_usd", "captchaflow_provider_submissions_total",
			"captchaflow_nexus_operations_total", "captchaflow_nexus_solves_finished_total"} {
			if !slices.Contains(queried, want) {
				return fmt.Errorf("no panel queries %s", want)
			}
		}
		return nil
	}
	dashboard := read(t, "deploy/grafana/captchaflow-routing.json")
	require.NoError(t, check(dashboard))
	assert.ErrorContains(t, check(strings.Replace(dashboard, "captchaflow_route_bad_share", "captchaflow_route_bad_ratio", 1)),
		"does not export", "a renamed metric is caught")
	assert.ErrorContains(t, check(strings.ReplaceAll(dashboard, "captchaflow_provider_price_usd", "captchaflow_route_bad_share")),
		"no panel queries", "a missing panel is caught")
}
