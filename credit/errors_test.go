package credit

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOverrunErrorMessage(t *testing.T) {
	r := NewReceiver(100)
	err := r.Receive(101)
	require.EqualError(t, err, "received 101 bytes, allowed 100")
}

// TestTypedErrors produces every peer error through the real API and checks
// it with errors.Is and errors.As only.
func TestTypedErrors(t *testing.T) {
	tests := []struct {
		name  string
		do    func() error
		is    []error // sentinels it must match
		isNot []error // sentinels it must not match
		check func(t *testing.T, err error)
	}{
		{
			name:  "overrun",
			do:    func() error { r := NewReceiver(100); return r.Receive(101) },
			is:    []error{ErrOverrun},
			isNot: []error{ErrOverflow, ErrInvalidLimit, ErrBadResume},
			check: func(t *testing.T, err error) {
				var e *OverrunError
				require.ErrorAs(t, err, &e)
				assert.Equal(t, OverrunError{Received: 101, Allowed: 100}, *e)
			},
		},
		{
			name: "overrun after progress",
			do: func() error {
				r := NewReceiver(10)
				require.NoError(t, r.Receive(7))
				r.Consume(7)
				l, ok := r.Grant()
				require.True(t, ok)
				require.Equal(t, int64(17), l)
				return r.Receive(11)
			},
			is: []error{ErrOverrun},
			check: func(t *testing.T, err error) {
				var e *OverrunError
				require.ErrorAs(t, err, &e)
				assert.Equal(t, OverrunError{Received: 18, Allowed: 17}, *e)
			},
		},
		{
			name: "receive overflows int64",
			do: func() error {
				r := NewReceiver(math.MaxInt64)
				require.NoError(t, r.Receive(math.MaxInt64-5))
				return r.Receive(6)
			},
			is:    []error{ErrOverflow},
			isNot: []error{ErrOverrun},
			check: func(t *testing.T, err error) {
				var e *OverflowError
				require.ErrorAs(t, err, &e)
				assert.Equal(t, OverflowError{Offset: math.MaxInt64 - 5, N: 6}, *e)
			},
		},
		{
			name:  "negative limit",
			do:    func() error { _, err := NewSender(10).UpdateLimit(-3); return err },
			is:    []error{ErrInvalidLimit, ErrOverflow},
			isNot: []error{ErrOverrun, ErrBadResume},
			check: func(t *testing.T, err error) {
				var e *LimitError
				require.ErrorAs(t, err, &e)
				assert.Equal(t, int64(-3), e.Limit)
			},
		},
		{
			name: "sender most negative limit",
			do:   func() error { _, err := NewSender(10).UpdateLimit(math.MinInt64); return err },
			is:   []error{ErrInvalidLimit, ErrOverflow},
			check: func(t *testing.T, err error) {
				var e *LimitError
				require.ErrorAs(t, err, &e)
				assert.Equal(t, int64(math.MinInt64), e.Limit)
			},
		},
		{
			name:  "resume received more than sent",
			do:    func() error { s := NewSender(100); s.Take(40); return s.Resume(41, 100) },
			is:    []error{ErrBadResume},
			isNot: []error{ErrOverrun, ErrInvalidLimit},
			check: func(t *testing.T, err error) {
				var e *ResumeError
				require.ErrorAs(t, err, &e)
				assert.Equal(t, ResumeError{Received: 41, Sent: 40, Limit: 100}, *e)
			},
		},
		{
			name: "resume limit below received",
			do:   func() error { s := NewSender(100); s.Take(40); return s.Resume(30, 29) },
			is:   []error{ErrBadResume},
			check: func(t *testing.T, err error) {
				var e *ResumeError
				require.ErrorAs(t, err, &e)
				assert.Equal(t, ResumeError{Received: 30, Sent: 40, Limit: 29}, *e)
			},
		},
		{
			name: "resume negative received",
			do:   func() error { return NewSender(100).Resume(-1, 100) },
			is:   []error{ErrBadResume},
			check: func(t *testing.T, err error) {
				var e *ResumeError
				require.ErrorAs(t, err, &e)
				assert.Equal(t, int64(-1), e.Received)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.do()
			require.Error(t, err)
			for _, target := range tt.is {
				assert.ErrorIs(t, err, target)
			}
			for _, target := range tt.isNot {
				assert.NotErrorIs(t, err, target)
			}
			if tt.check != nil {
				tt.check(t, err)
			}
			// Wrapped with context, as callers will, it still matches.
			wrapped := errors.Join(errors.New("stdin"), err)
			for _, target := range tt.is {
				assert.ErrorIs(t, wrapped, target)
			}
		})
	}
}
