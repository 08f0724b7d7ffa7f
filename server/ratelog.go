package server

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// rateLog bounds how often a kind of line a peer can cause (a refusal)
// is logged at Info: once per interval per key, the others of the
// interval at Debug. The next line at Info says how many went to Debug
// meanwhile ("suppressed"), through log. A peer that makes the server log
// cannot make it write more than a line a second per key at Info. Keys
// are a fixed set (the refusal reasons), so the map stays small. Safe for
// concurrent use.
type rateLog struct {
	log   *slog.Logger
	every time.Duration
	now   func() time.Time

	mu   sync.Mutex
	last map[string]rateEntry // by key
}

type rateEntry struct {
	at         time.Time
	suppressed int
}

func newRateLog(log *slog.Logger, every time.Duration) *rateLog {
	return &rateLog{log: log, every: every, now: time.Now, last: make(map[string]rateEntry)}
}

// level returns the level to log a line of key at now: Info at most once
// per interval, else Debug.
func (r *rateLog) level(key string) slog.Level {
	now := r.now()
	r.mu.Lock()
	e, seen := r.last[key]
	if seen && now.Sub(e.at) < r.every {
		e.suppressed++
		r.last[key] = e
		r.mu.Unlock()
		return slog.LevelDebug
	}
	r.last[key] = rateEntry{at: now}
	r.mu.Unlock()
	if e.suppressed > 0 {
		r.log.LogAttrs(context.Background(), slog.LevelInfo, "lines logged at debug only", slog.String("key", key),
			slog.Int("suppressed", e.suppressed), slog.Duration("within", now.Sub(e.at)))
	}
	return slog.LevelInfo
}

// Info logs msg at Info or, past the rate, at Debug, keyed by msg.
func (r *rateLog) Info(msg string, args ...any) {
	r.log.Log(context.Background(), r.level(msg), msg, args...)
}

// logRefused logs a refusal with its reason through log: at Info at most
// once a second per reason, else at Debug (every refusal is counted in
// procwire_refusals_total all the same).
func (s *Server) logRefused(log *slog.Logger, reason string, args ...any) {
	log.Log(context.Background(), s.refusals.level(reason), "refused", append([]any{"reason", reason}, args...)...)
}
