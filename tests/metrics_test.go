package tests

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// sampleLine and labelPair parse Prometheus text format: a sample (name, {labels}, value), and one label pair.
var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)`)
var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// metricSum adds up the samples of name whose labels include want.
func metricSum(text, name string, want map[string]string) (sum float64, found bool) {
	for _, line := range strings.Split(text, "\n") {
		m := sampleLine.FindStringSubmatch(line)
		if m == nil || m[1] != name {
			continue
		}
		labels := map[string]string{}
		for _, lp := range labelPair.FindAllStringSubmatch(m[2], -1) {
			labels[lp[1]] = lp[2]
		}
		match := true
		for k, v := range want {
			if labels[k] != v {
				match = false
			}
		}
		if !match {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err == nil {
			sum += v
			found = true
		}
	}
	return sum, found
}

// metricWant is one series on a /metrics page; atLeast is how far a test wants it to move.
type metricWant struct {
	url     string
	name    string
	labels  map[string]string
	atLeast float64
}

func (w metricWant) String() string {
	keys := mapsKeys(w.labels)
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+`="`+w.labels[k]+`"`)
	}
	return w.name + "{" + strings.Join(parts, ",") + "}"
}

func scrape(ctx context.Context, url string) (string, error) {
	status, body, err := httpGet(ctx, url)
	if err != nil {
		return "", err
	}
	if status != http.StatusOK {
		return "", fmt.Errorf("GET %s: %d", url, status)
	}
	return body, nil
}

// metricsSnapshot reads every wanted series now.
func metricsSnapshot(ctx context.Context, wants []metricWant) (map[string]float64, error) {
	texts := map[string]string{}
	out := map[string]float64{}
	for _, w := range wants {
		text, ok := texts[w.url]
		if !ok {
			var err error
			if text, err = scrape(ctx, w.url); err != nil {
				return nil, err
			}
			texts[w.url] = text
		}
		v, _ := metricSum(text, w.name, w.labels)
		out[w.url+" "+w.String()] = v
	}
	return out, nil
}
