//go:build linux

package bridge

import (
	"errors"
	"fmt"
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

// StartError reports why Start did not start the child. Reason is one of the
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

// StdinOverflowError is returned by PushStdin when the push would make the
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

// UnsupportedSignalError is returned by Signal for any signal other than
// SIGINT, SIGTERM and SIGKILL.
type UnsupportedSignalError struct {
	Signal syscall.Signal
}

func (e *UnsupportedSignalError) Error() string {
	return fmt.Sprintf("signal %s not supported: only SIGINT, SIGTERM and SIGKILL", signalName(int(e.Signal)))
}

// DestroyTimeoutError is returned by Destroy when teardown did not finish
// within Config.DestroyWait. Pending names the first step still unfinished.
// The goroutines still end on their own once the kernel lets the child die.
type DestroyTimeoutError struct {
	Wait    time.Duration
	Pending string
}

func (e *DestroyTimeoutError) Error() string {
	return fmt.Sprintf("destroy process: not finished within %v: %s pending", e.Wait, e.Pending)
}

var (
	// ErrStdinClosed is returned by PushStdin after CloseStdin.
	ErrStdinClosed = errors.New("bridge: stdin closed")
	// ErrDestroyed is returned by PushStdin after Destroy.
	ErrDestroyed = errors.New("bridge: process destroyed")
	// ErrInvalidConfig is wrapped by Start's error for a negative Config field.
	ErrInvalidConfig = errors.New("bridge: invalid config")
)
