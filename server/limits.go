package server

import (
	"fmt"
	"math"

	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/proc"
)

// Limiter is implemented by an Executor whose processes are bounded:
// Limits returns the limits in force for every process, which an open
// may tighten and never loosen. An Executor without it bounds nothing.
type Limiter interface {
	Limits() proc.Limits
}

// openLimits resolves the limits an open asked for (nil: none asked)
// against the executor's: the limits for the process, and, when the open
// carried limits, those in force for its evidence. A limit asked that is
// looser than the executor's, or that the executor does not enforce at
// all, is an error saying which.
func openLimits(e Executor, asked *frames.Limits) (proc.Limits, *frames.Limits, error) {
	var ceiling proc.Limits
	if l, ok := e.(Limiter); ok {
		ceiling = l.Limits()
	}
	if asked == nil {
		return proc.Limits{}, nil, nil
	}
	want := proc.Limits{Pids: asked.Pids, Memory: asked.Memory, CPU: float64(asked.CPUMillicores) / 1000}
	for _, c := range []struct {
		name         string
		asked, limit float64
	}{
		{"pids", float64(want.Pids), float64(ceiling.Pids)},
		{"memory", float64(want.Memory), float64(ceiling.Memory)},
		{"cpu_millicores", float64(asked.CPUMillicores), math.Round(ceiling.CPU * 1000)},
	} {
		switch {
		case c.asked == 0:
		case c.limit == 0:
			return proc.Limits{}, nil, fmt.Errorf("open.limits.%s: this server enforces no such limit", c.name)
		case c.asked > c.limit:
			return proc.Limits{}, nil, fmt.Errorf("open.limits.%s: %.0f is above the server's %.0f", c.name, c.asked, c.limit)
		}
	}
	in := ceiling.Tighten(want)
	return want, &frames.Limits{Pids: in.Pids, Memory: in.Memory, CPUMillicores: int64(math.Round(in.CPU * 1000))}, nil
}
