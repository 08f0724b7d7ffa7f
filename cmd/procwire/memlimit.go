//go:build linux

package main

import (
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/procwire/procwire/internal/size"
)

// memoryOverhead is what serve's memory may take beyond its budget
// (--max-memory): the Go runtime, each connection's and process's own
// state, and what the collector has yet to return. serve's RSS stays
// within the budget plus this (internal/testkit/rsstest measures it).
const memoryOverhead = 128 << 20

// runtimeSlack is the part of memoryOverhead left between the runtime's
// soft memory limit and the bound, for what the runtime does not count
// (the binary's text, cgo, the kernel's page rounding).
const runtimeSlack = 64 << 20

// setMemoryLimit tells the Go runtime the server's budget: a soft memory
// limit of budget + memoryOverhead - runtimeSlack, so that the collector
// runs as the heap nears it instead of letting it grow to twice what is
// live (GOGC). A GOMEMLIMIT in the environment is the operator's choice
// and is kept. restore puts back the limit before (serve runs inside tests
// too).
func setMemoryLimit(budget int64, log *slog.Logger) (restore func()) {
	if v := os.Getenv("GOMEMLIMIT"); v != "" {
		log.Info("memory", "budget", size.Format(budget), "gomemlimit", v)
		return func() {}
	}
	limit := budget + memoryOverhead - runtimeSlack
	prev := debug.SetMemoryLimit(limit)
	log.Info("memory", "budget", size.Format(budget), "runtime_limit", size.Format(limit),
		"rss_bound", size.Format(budget+memoryOverhead))
	return func() { debug.SetMemoryLimit(prev) }
}
