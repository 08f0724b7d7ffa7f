//go:build linux

package bridge

import "github.com/procwire/procwire/proc"

// The request, configuration, exit and error types are package proc's, so
// that code using them builds on every platform; these names keep bridge's
// API whole.
type (
	// Request is proc.Request.
	Request = proc.Request
	// Config is proc.Config.
	Config = proc.Config
	// ExitStatus is proc.ExitStatus.
	ExitStatus = proc.ExitStatus
	// StartError is proc.StartError.
	StartError = proc.StartError
	// StdinOverflowError is proc.StdinOverflowError.
	StdinOverflowError = proc.StdinOverflowError
	// UnsupportedSignalError is proc.UnsupportedSignalError.
	UnsupportedSignalError = proc.UnsupportedSignalError
	// DestroyTimeoutError is proc.DestroyTimeoutError.
	DestroyTimeoutError = proc.DestroyTimeoutError
	// SurvivorsError is proc.SurvivorsError.
	SurvivorsError = proc.SurvivorsError
	// User is proc.User.
	User = proc.User
)

// Reasons carried by StartError, and the defaults of Config.
const (
	ReasonExecutableNotFound      = proc.ReasonExecutableNotFound
	ReasonPermissionDenied        = proc.ReasonPermissionDenied
	ReasonWorkingDirectoryInvalid = proc.ReasonWorkingDirectoryInvalid
	ReasonStartFailed             = proc.ReasonStartFailed
	ReasonOOM                     = proc.ReasonOOM

	DefaultStdoutWindow = proc.DefaultStdoutWindow
	DefaultStderrRing   = proc.DefaultStderrRing
	DefaultStdinWindow  = proc.DefaultStdinWindow
	DefaultExitWait     = proc.DefaultExitWait
	DefaultDestroyWait  = proc.DefaultDestroyWait

	DefaultPath = proc.DefaultPath
)

// Errors of a Process, as proc defines them.
var (
	ErrStdinClosed   = proc.ErrStdinClosed
	ErrDestroyed     = proc.ErrDestroyed
	ErrInvalidConfig = proc.ErrInvalidConfig
)

// DefaultConfig returns a Config with every field at its default.
func DefaultConfig() *Config { return proc.DefaultConfig() }

// signalName names signal number n.
func signalName(n int) string { return proc.SignalName(n) }
