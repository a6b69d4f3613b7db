package main

import (
	"math"
	"slices"
	"time"
)

// Dist summarises a latency sample in milliseconds.
type Dist struct {
	Count int     `json:"count"`
	Min   float64 `json:"min_ms"`
	P50   float64 `json:"p50_ms"`
	P95   float64 `json:"p95_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
	Mean  float64 `json:"mean_ms"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// summarize returns the distribution of xs (milliseconds); percentiles are nearest-rank.
func summarize(xs []float64) Dist {
	if len(xs) == 0 {
		return Dist{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	return Dist{
		Count: len(s),
		Min:   round2(s[0]),
		P50:   round2(percentile(s, 50)),
		P95:   round2(percentile(s, 95)),
		P99:   round2(percentile(s, 99)),
		Max:   round2(s[len(s)-1]),
		Mean:  round2(sum / float64(len(s))),
	}
}

// percentile is the nearest-rank percentile of sorted s.
func percentile(s []float64, p float64) float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }

func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return math.Round(a/b*1000) / 1000
}

func round3(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }
