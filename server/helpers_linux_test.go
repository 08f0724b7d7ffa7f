package server

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/procwire/procwire/proc"
)

// groupGone reports whether process group pgid has no live member left
// (zombies waiting for their new parent to reap them do not count).
func groupGone(pgid int) bool {
	if errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) {
		return true
	}
	names, err := os.ReadDir("/proc")
	if err != nil {
		panic(err)
	}
	for _, e := range names {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) >= 3 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" && f[0] != "X" {
			return false
		}
	}
	return true
}

// wchan returns the kernel function process pid sleeps in.
func wchan(pid int) string {
	// pid is the process's init (bridge.MaybeRunInit): the child is its
	// child.
	if cmd, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); string(cmd) == "procwire-init\x00" {
		stats, _ := filepath.Glob("/proc/[0-9]*/stat")
		for _, st := range stats {
			b, err := os.ReadFile(st)
			if err != nil {
				continue
			}
			s := string(b)
			if f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); len(f) > 1 && f[1] == strconv.Itoa(pid) {
				pid, _ = strconv.Atoi(strings.Split(st, "/")[2])
				break
			}
		}
	}
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/wchan")
	return string(b)
}

// countingExecutor starts bridge processes and counts the signals sent to
// them.
type countingExecutor struct {
	mu    sync.Mutex
	procs []*countingProcess
}

type countingProcess struct {
	Process
	signals atomic.Int32
}

func (p *countingProcess) Signal(sig syscall.Signal) (bool, error) {
	p.signals.Add(1)
	return p.Process.Signal(sig)
}

// proc returns the i-th process started.
func (e *countingExecutor) proc(i int) *countingProcess {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.procs[i]
}

func (e *countingExecutor) Start(ctx context.Context, req proc.Request, cfg proc.Config) (Process, error) {
	p, err := BridgeExecutor{}.Start(ctx, req, cfg)
	if err != nil {
		return nil, err
	}
	cp := &countingProcess{Process: p}
	e.mu.Lock()
	e.procs = append(e.procs, cp)
	e.mu.Unlock()
	return cp, nil
}
