package link

import (
	"context"
	"time"
)

// Heartbeat calls ping every interval, each call bounded by one interval,
// until ctx ends (nil) or a ping fails while ctx has not ended (its
// error). ping is the caller's hook: whatever must happen before each
// ping happens in it (the pong is read by whoever reads the connection).
func Heartbeat(ctx context.Context, every time.Duration, ping func(context.Context) error) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, every)
		err := ping(pctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}
