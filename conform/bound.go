package conform

import (
	"context"
	"fmt"
	"time"

	"github.com/procwire/procwire/frames"
)

// DefaultAnswerTimeout bounds, when Config.AnswerTimeout is zero, each wait
// for an answer a server owes at once: the answer to a first frame (open,
// resume, destroy) and the close of a refused upgrade. A server that
// accepts every upgrade and then says nothing so fails each case within
// it, naming what the case waited for, instead of holding every case for
// its whole CaseTimeout.
const DefaultAnswerTimeout = 10 * time.Second

// noAnswerError is the cause of a bounded wait that ran out.
type noAnswerError struct{ d time.Duration }

func (e *noAnswerError) Error() string {
	return fmt.Sprintf("the server sent nothing within %v", e.d)
}

// bounded returns ctx bounded by the run's answer timeout, for a wait on
// an answer the server owes at once. A read that runs out of it fails with
// a *noAnswerError.
func (t *T) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	d := t.r.cfg.AnswerTimeout
	return context.WithTimeoutCause(ctx, d, &noAnswerError{d})
}

// nextAnswer reads the answer the server owes at once on p, bounded.
func (t *T) nextAnswer(ctx context.Context, p *peer) (frames.Frame, error) {
	bctx, cancel := t.bounded(ctx)
	defer cancel()
	return p.next(bctx)
}
