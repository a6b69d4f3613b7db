package main

import (
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
)

// write saves the run's results.json, results.md, samples.json and plot in -out and prints the Markdown.
func (b *bench) write() error {
	if err := os.MkdirAll(b.cfg.out, 0o755); err != nil {
		return err
	}
	js, err := json.MarshalIndent(b.res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(b.cfg.out, "results.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	md := renderMarkdown(b.res)
	if err := os.WriteFile(filepath.Join(b.cfg.out, "results.md"), []byte(md), 0o644); err != nil {
		return err
	}
	if len(b.samples) > 0 {
		raw, err := json.Marshal(b.samples)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(b.cfg.out, "samples.json"), raw, 0o644); err != nil {
			return err
		}
		if err := plotFiles(b.cfg.out, b.samples, b.res.Label, b.cfg.copyPlot); err != nil {
			return err
		}
	}
	fmt.Print("\n" + md)
	log.Printf("wrote %s/results.{json,md} and latency.{svg,png} in %.0fs", b.cfg.out, b.res.DurationSeconds)
	return nil
}

// plotFiles writes latency.svg and latency.png to dir, and copies the SVG to copyTo if set.
func plotFiles(dir string, samples []latencySamples, label, copyTo string) error {
	svgPath := filepath.Join(dir, "latency.svg")
	for _, path := range []string{svgPath, filepath.Join(dir, "latency.png")} {
		if err := writePlot(path, samples, label); err != nil {
			return fmt.Errorf("plot: %w", err)
		}
	}
	if copyTo == "" {
		return nil
	}
	svg, err := os.ReadFile(svgPath)
	if err != nil {
		return err
	}
	return os.WriteFile(copyTo, svg, 0o644)
}

// replot redraws the plot and the Markdown of an earlier run from its samples.json and results.json.
func replot(dir, copyTo string) error {
	var samples []latencySamples
	var res Results
	for name, v := range map[string]any{"samples.json": &samples, "results.json": &res} {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if err := json.Unmarshal(raw, v); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	res.Targets = evaluateTargets(&res)
	md := renderMarkdown(&res)
	if err := os.WriteFile(filepath.Join(dir, "results.md"), []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Print(md)
	return plotFiles(dir, samples, res.Label, copyTo)
}
