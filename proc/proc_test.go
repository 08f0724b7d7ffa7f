package proc

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/frames"
)

func TestSignalNames(t *testing.T) {
	for n, want := range map[int]string{
		1: "SIGHUP", 2: "SIGINT", 9: "SIGKILL", 15: "SIGTERM", 31: "SIGSYS",
		32: "SIGRTMIN+0", 34: "SIGRTMIN+2", 64: "SIGRTMIN+32", 65: "SIG65",
	} {
		require.Equal(t, want, SignalName(n), "signal %d", n)
	}
	for n := 1; n <= sigRTMax; n++ {
		require.True(t, frames.ExitSignalName(SignalName(n)), "signal %d is named %q, outside the wire's vocabulary", n, SignalName(n))
	}
	require.Equal(t, "signal SIGTERM", ExitStatus{Signal: "SIGTERM"}.String())
	require.Equal(t, "exit 3", ExitStatus{Code: 3}.String())
}

func TestConfigResolve(t *testing.T) {
	c, err := (*Config)(nil).Resolve()
	require.NoError(t, err)
	require.Equal(t, *DefaultConfig(), c)
	c, err = (&Config{StdoutWindow: 7, RunAs: &User{UID: 1, GID: 2}}).Resolve()
	require.NoError(t, err)
	want := *DefaultConfig()
	want.StdoutWindow = 7
	want.RunAs = &User{UID: 1, GID: 2}
	require.Equal(t, want, c)
	for _, bad := range []Config{{StdinWindow: -1}, {StderrRing: -1}, {ExitWait: -1}, {DestroyWait: -1}} {
		_, err := bad.Resolve()
		require.ErrorIs(t, err, ErrInvalidConfig)
	}
}

func TestErrors(t *testing.T) {
	se := &SurvivorsError{Containment: "process group 7", Wait: time.Second, Count: 3,
		Survivors: []Survivor{{Pid: 8, Command: "sleep"}, {Pid: 9}}}
	require.Equal(t, "destroy process: 3 processes of process group 7 alive 1s after SIGKILL: 8 (sleep), 9, …", se.Error())
	require.True(t, errors.As(error(se), new(*SurvivorsError)))
	st := &StartError{Reason: ReasonStartFailed, Err: ErrInvalidConfig}
	require.ErrorIs(t, st, ErrInvalidConfig)
	require.Equal(t, "uid 65534 gid 65534", (&User{UID: 65534, GID: 65534}).String())
}
