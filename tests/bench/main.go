// Command bench drives the real captchaflow stack (worker, ingress, provider simulator with instant solves and
// pingbacks, and Temporal: a dev server it starts, or an external server such as the PostgreSQL-backed cluster)
// and, in the same run with the same N and C, a bare twin workflow of the same shape with no I/O (package twin).
// captchaflow's figures are reported as ratios to the twin's, because absolute times on a shared machine drift.
//
//	go run ./bench                                   # dev server, C = 20 and 100, 1 000 and 10 000 waiting tasks
//	go run ./bench -temporal-address 127.0.0.1:7333  # the PostgreSQL cluster (cluster/up.sh --detach)
//	go run ./bench -phases throughput -c 20 -n 500   # one phase, e.g. to try a lever
//
// It prints a Markdown table and writes results.json, results.md and latency.svg to -out.
package main

import (
	"context"
	"log"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	log.SetFlags(log.Ltime | log.Lmicroseconds)
	log.SetPrefix("bench: ")
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		log.Print(err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	if cfg.replot {
		if err := replot(cfg.out, cfg.copyPlot); err != nil {
			log.Printf("FAILED: %v", err)
			os.Exit(1)
		}
		return
	}
	if err := run(ctx, cfg); err != nil {
		log.Printf("FAILED: %v", err)
		os.Exit(1)
	}
}
