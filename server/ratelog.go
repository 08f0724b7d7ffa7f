package server

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// rateLog logs through a logger at most once per interval per message;
// the lines dropped meanwhile are counted and the next line logged says
// how many ("suppressed"). A peer that makes the server log (a refusal,
// a signal) cannot make it write faster than that. Safe for concurrent
// use.
type rateLog struct {
	log   *slog.Logger
	every time.Duration
	now   func() time.Time

	mu   sync.Mutex
	last map[string]rateEntry // by message; a few fixed messages only
}

type rateEntry struct {
	at         time.Time
	suppressed int
}

func newRateLog(log *slog.Logger, every time.Duration) *rateLog {
	return &rateLog{log: log, every: every, now: time.Now, last: make(map[string]rateEntry)}
}

// Info logs msg at Info unless a line with the same msg was logged within
// the interval; then it is counted, and logged at Debug only.
func (r *rateLog) Info(msg string, args ...any) {
	if !r.allow(msg) {
		r.log.Debug(msg, args...)
		return
	}
	r.log.Info(msg, args...)
}

// allow reports whether msg may be logged now, adding the count of the
// suppressed ones to the line through r.log when it may.
func (r *rateLog) allow(msg string) bool {
	now := r.now()
	r.mu.Lock()
	e, seen := r.last[msg]
	if seen && now.Sub(e.at) < r.every {
		e.suppressed++
		r.last[msg] = e
		r.mu.Unlock()
		return false
	}
	r.last[msg] = rateEntry{at: now}
	r.mu.Unlock()
	if e.suppressed > 0 {
		r.log.LogAttrs(context.Background(), slog.LevelInfo, msg+": lines suppressed", slog.Int("suppressed", e.suppressed), slog.Duration("within", now.Sub(e.at)))
	}
	return true
}
