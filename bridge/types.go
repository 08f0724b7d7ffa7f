//go:build linux

package bridge

import "github.com/procwire/procwire/proc"

// These names are proc's, kept only for the server's and fuzz's tests that
// still spell them bridge.X (server/{helpers,order,openkey,process}_test.go,
// fuzz/{server,lifecycle}_test.go). Package bridge itself names proc's; once
// those tests do too, this file goes.
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
)

// Reasons carried by StartError.
const (
	ReasonExecutableNotFound      = proc.ReasonExecutableNotFound
	ReasonPermissionDenied        = proc.ReasonPermissionDenied
	ReasonWorkingDirectoryInvalid = proc.ReasonWorkingDirectoryInvalid
)

// Errors of a Process, as proc defines them.
var (
	ErrStdinClosed = proc.ErrStdinClosed
	ErrDestroyed   = proc.ErrDestroyed
)
