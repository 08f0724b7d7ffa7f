package credit

import (
	"context"
	"fmt"
	"sync"
)

// Window is a Sender for writers that wait for credit, like x/crypto/ssh's
// window.reserve. It is safe for concurrent use and starts no goroutines: a
// blocked Reserve is woken by Update, Reset, Close or its context.
type Window struct {
	mu sync.Mutex
	s  Sender // guarded by mu
	// err is non-nil once closed; guarded by mu.
	err error
	// wake is closed (and set to nil) to wake every blocked Reserve; it is
	// made only when someone waits, so the uncontended path allocates
	// nothing. Guarded by mu.
	wake chan struct{}
}

// NewWindow returns a Window that may send up to limit bytes. It panics if
// limit is negative.
func NewWindow(limit int64) *Window {
	return &Window{s: *NewSender(limit)}
}

// Reserve waits until credit is available, then takes min(max, available)
// bytes of it and returns how many. It returns early with an error if ctx
// ends (wrapping ctx.Err(), so errors.Is works) or the Window is closed (the
// error given to Close, or ErrClosed). It panics unless max > 0.
func (w *Window) Reserve(ctx context.Context, max int64) (int64, error) {
	if max <= 0 {
		panic("credit: Reserve needs max > 0")
	}
	w.mu.Lock()
	for {
		if err := w.err; err != nil {
			w.mu.Unlock()
			return 0, err
		}
		if err := ctx.Err(); err != nil {
			w.mu.Unlock()
			return 0, fmt.Errorf("credit: reserve: %w", err)
		}
		if n := w.s.Take(max); n > 0 {
			w.mu.Unlock()
			return n, nil
		}
		if w.wake == nil {
			w.wake = make(chan struct{})
		}
		wake := w.wake
		w.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
		}
		w.mu.Lock()
	}
}

// Update records a limit announced by the peer, as Sender.UpdateLimit does,
// and wakes blocked Reserve calls if it grew.
func (w *Window) Update(limit int64) (grew bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	grew, err = w.s.UpdateLimit(limit)
	if grew {
		w.wakeLocked()
	}
	return grew, err
}

// Reset sets both offsets, as Sender.Reset does, and wakes blocked Reserve
// calls. It does not reopen a closed Window.
func (w *Window) Reset(sent, limit int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.s.Reset(sent, limit)
	w.wakeLocked()
}

// Resume is Reset for numbers that come from the peer, as Sender.Resume.
func (w *Window) Resume(received, limit int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.s.Resume(received, limit); err != nil {
		return err
	}
	w.wakeLocked()
	return nil
}

// Close makes every blocked and future Reserve return err, or ErrClosed if
// err is nil. Only the first Close counts; a Window cannot be reopened.
func (w *Window) Close(err error) {
	if err == nil {
		err = ErrClosed
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
		w.wakeLocked()
	}
}

// Sent returns the offset after the last byte reserved.
func (w *Window) Sent() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.s.Sent()
}

// Limit returns the offset the peer allows sending up to.
func (w *Window) Limit() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.s.Limit()
}

// Available returns how many bytes Reserve could take now.
func (w *Window) Available() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.s.Available()
}

// wakeLocked wakes every blocked Reserve to look again. w.mu must be held.
func (w *Window) wakeLocked() {
	if w.wake != nil {
		close(w.wake)
		w.wake = nil
	}
}
