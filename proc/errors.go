package proc

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"
)

// Reasons carried by StartError.
const (
	// ReasonExecutableNotFound: the executable does not exist, or no
	// directory of the request's PATH holds it.
	ReasonExecutableNotFound = "executable_not_found"
	// ReasonPermissionDenied: the executable exists but cannot be executed.
	ReasonPermissionDenied = "permission_denied"
	// ReasonWorkingDirectoryInvalid: the working directory is empty, not
	// absolute, missing, not a directory or not searchable.
	ReasonWorkingDirectoryInvalid = "working_directory_invalid"
	// ReasonStartFailed: anything else that kept the child from starting
	// (bad environment key, pipe or fork failure, exec format error).
	ReasonStartFailed = "start_failed"
)

// StartError reports why an executor did not start the child. Reason is one of the
// Reason constants; Err is the underlying cause.
type StartError struct {
	Reason string
	Err    error
}

func (e *StartError) Error() string {
	return fmt.Sprintf("start process: %s: %v", e.Reason, e.Err)
}

// Unwrap returns the underlying cause.
func (e *StartError) Unwrap() error { return e.Err }

// StdinOverflowError is returned by a process's PushStdin when the push would make the
// stdin queue exceed Config.StdinWindow. A server that grants credit
// correctly never sees it; when it does, the peer sent beyond its credit.
type StdinOverflowError struct {
	Queued int // bytes already queued
	Pushed int // bytes in the rejected push
	Window int // Config.StdinWindow
}

func (e *StdinOverflowError) Error() string {
	return fmt.Sprintf("stdin overflow: pushed %d bytes onto %d queued, window is %d", e.Pushed, e.Queued, e.Window)
}

// UnsupportedSignalError is returned by a process's Signal for any signal other than
// SIGINT, SIGTERM and SIGKILL.
type UnsupportedSignalError struct {
	Signal syscall.Signal
}

func (e *UnsupportedSignalError) Error() string {
	return fmt.Sprintf("signal %s not supported: only SIGINT, SIGTERM and SIGKILL", SignalName(int(e.Signal)))
}

// DestroyTimeoutError is returned by Destroy when a step of the teardown
// did not finish within Config.DestroyWait and no surviving process can be
// named (a pump, the reap, a containment whose last member died just
// after the bound). Pending names the first step still unfinished; a later
// Destroy tries again.
type DestroyTimeoutError struct {
	Wait    time.Duration
	Pending string
}

func (e *DestroyTimeoutError) Error() string {
	return fmt.Sprintf("destroy process: not finished within %v: %s pending", e.Wait, e.Pending)
}

// Survivor is one process that outlived a destroy.
type Survivor struct {
	Pid     int
	Command string // its command name, as /proc/PID/comm says; may be empty
}

// SurvivorsError is returned by Destroy when members of the process's
// containment are still alive Config.DestroyWait after they were killed, so
// the process is not destroyed; a later Destroy tries again. Survivors lists
// some of them (at most 16), Count how many there were.
type SurvivorsError struct {
	Containment string // what was killed: "cgroup /sys/fs/cgroup/…", "process group 1234", …
	Wait        time.Duration
	Count       int
	Survivors   []Survivor
}

func (e *SurvivorsError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "destroy process: %d processes of %s alive %v after SIGKILL", e.Count, e.Containment, e.Wait)
	for i, s := range e.Survivors {
		if i == 0 {
			b.WriteString(":")
		} else {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " %d", s.Pid)
		if s.Command != "" {
			fmt.Fprintf(&b, " (%s)", s.Command)
		}
	}
	if len(e.Survivors) < e.Count {
		b.WriteString(", …")
	}
	return b.String()
}

var (
	// ErrStdinClosed is returned by PushStdin after CloseStdin.
	ErrStdinClosed = errors.New("proc: stdin closed")
	// ErrDestroyed is returned by PushStdin after Destroy.
	ErrDestroyed = errors.New("proc: process destroyed")
	// ErrInvalidConfig is wrapped by Resolve's error for a negative Config
	// field.
	ErrInvalidConfig = errors.New("proc: invalid config")
)
