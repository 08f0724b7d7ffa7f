package replay

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTypedErrors produces every error through the real API and checks it
// with errors.Is and errors.As only.
func TestTypedErrors(t *testing.T) {
	// held returns a Buffer holding offsets [10, 30) of a 32-byte capacity.
	held := func() *Buffer {
		b := New(32)
		b.Append(make([]byte, 30))
		require.NoError(t, b.Ack(10))
		return b
	}
	all := []error{ErrGap, ErrBeyond, ErrAckBackwards, ErrAckBeyond}
	tests := []struct {
		name  string
		do    func(b *Buffer) error
		is    error
		check func(t *testing.T, err error)
	}{
		{"slice gap", func(b *Buffer) error { _, _, err := b.Slice(9, 1); return err }, ErrGap,
			func(t *testing.T, err error) {
				var e *GapError
				require.ErrorAs(t, err, &e)
				assert.Equal(t, GapError{Requested: 9, Oldest: 10}, *e)
			}},
		{"copy gap", func(b *Buffer) error { _, err := b.CopyAt(make([]byte, 4), 0); return err }, ErrGap,
			func(t *testing.T, err error) {
				var e *GapError
				require.ErrorAs(t, err, &e)
				assert.Equal(t, GapError{Requested: 0, Oldest: 10}, *e)
			}},
		{"slice beyond", func(b *Buffer) error { _, _, err := b.Slice(31, 1); return err }, ErrBeyond,
			func(t *testing.T, err error) {
				var e *BeyondError
				require.ErrorAs(t, err, &e)
				assert.Equal(t, BeyondError{Requested: 31, End: 30}, *e)
			}},
		{"copy beyond", func(b *Buffer) error { _, err := b.CopyAt(nil, 99); return err }, ErrBeyond,
			func(t *testing.T, err error) {
				var e *BeyondError
				require.ErrorAs(t, err, &e)
				assert.Equal(t, BeyondError{Requested: 99, End: 30}, *e)
			}},
		{"ack backwards", func(b *Buffer) error { return b.Ack(9) }, ErrAckBackwards,
			func(t *testing.T, err error) {
				var e *AckError
				require.ErrorAs(t, err, &e)
				assert.Equal(t, AckError{Offset: 9, Start: 10, End: 30, Err: ErrAckBackwards}, *e)
			}},
		{"ack beyond", func(b *Buffer) error { return b.Ack(31) }, ErrAckBeyond,
			func(t *testing.T, err error) {
				var e *AckError
				require.ErrorAs(t, err, &e)
				assert.Equal(t, AckError{Offset: 31, Start: 10, End: 30, Err: ErrAckBeyond}, *e)
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := held()
			err := tt.do(b)
			require.ErrorIs(t, err, tt.is)
			for _, other := range all {
				if other != tt.is {
					assert.NotErrorIs(t, err, other)
				}
			}
			tt.check(t, err)
			assert.ErrorIs(t, fmt.Errorf("resume stdout: %w", err), tt.is, "still matches when wrapped")
			assert.Equal(t, int64(10), b.Start(), "a refused call changes nothing")
			assert.Equal(t, int64(30), b.End())
		})
	}
}
