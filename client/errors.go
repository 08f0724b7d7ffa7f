package client

import (
	"errors"
	"fmt"
	"strings"

	"github.com/procwire/procwire/frames"
)

var (
	// ErrDestroyed is returned by every call made on a Process after Destroy
	// was requested (and by Wait when the process was destroyed before its
	// exit was seen).
	ErrDestroyed = errors.New("procwire: process destroyed")

	// ErrConnectionLost is returned when the connection to the server was
	// lost for good: reconnecting gave up within the server's grace, the
	// server shut down, or the process was resumed on another connection.
	ErrConnectionLost = errors.New("procwire: connection lost")

	// ErrStdinClosed is returned by a write after stdin was closed.
	ErrStdinClosed = errors.New("procwire: stdin closed")

	// ErrExpired is returned by Destroy when the server's grace ran out with
	// no connection: the server destroys such a process on its own.
	ErrExpired = errors.New("procwire: process expired")

	// ErrDetached is returned by every call made on a Process after Detach.
	ErrDetached = errors.New("procwire: process detached")
)

// ProtocolError says the server broke the wire: it sent something the
// client cannot decode or cross-check, such as an undecodable frame, a frame
// out of order, stdout past the window, a second different exit, or
// evidence that does not match the request. Contract maps it to
// SandboxOperationFailed{reason: "protocol_violation"} (or
// {operation: "open_process_identity", reason: "evidence_mismatch"}); the
// client never authors SandboxProtocolInvalid, which the contract reserves
// for the Runtime.
type ProtocolError struct {
	// Operation names the check that failed, such as "open_process" or
	// "open_process_identity" for evidence.
	Operation string
	// Field is the dotted path of the offending field, such as
	// "evidence.working_directory" or "stdout.off"; empty for a whole frame.
	Field string
	// Detail says what was wrong.
	Detail string
	// Err is the cause, if any (a *credit.OverrunError, ...).
	Err error
}

// Unwrap returns the cause.
func (e *ProtocolError) Unwrap() error { return e.Err }

// Error reads "procwire: protocol violation: <operation>: <field>: <detail>".
func (e *ProtocolError) Error() string {
	var b strings.Builder
	b.WriteString("procwire: protocol violation: ")
	b.WriteString(e.Operation)
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	return b.String()
}

// RemoteError is a typed refusal from the server, such as
// SandboxLifecycleConflict{operation: "open_process", actual:
// "process_already_open"} or SandboxOperationFailed{reason: "replay_gap"}.
type RemoteError struct {
	Frame frames.Error
}

// Error reads "procwire: <code>" followed by the frame's fields.
func (e *RemoteError) Error() string {
	f := &e.Frame
	var b strings.Builder
	b.WriteString("procwire: ")
	b.WriteString(string(f.Code))
	for _, kv := range [...][2]string{
		{"operation", f.Operation}, {"expected", f.Expected}, {"actual", f.Actual},
		{"requirement", f.Requirement}, {"reason", f.Reason}, {"message", f.Message},
	} {
		if kv[1] != "" {
			fmt.Fprintf(&b, " %s=%q", kv[0], kv[1])
		}
	}
	if f.Gap != nil {
		fmt.Fprintf(&b, " gap={requested %d, oldest %d}", f.Gap.Requested, f.Gap.Oldest)
	}
	return b.String()
}

// processGone reports whether err says the server no longer runs the
// process, so that destroying it again is pointless.
func processGone(err error) bool {
	var re *RemoteError
	if !errors.As(err, &re) {
		return errors.Is(err, ErrDestroyed)
	}
	switch re.Frame.Actual {
	case "process_not_found", "process_destroyed", "process_expired":
		return true
	}
	return re.Frame.Reason == "server_shutdown"
}

func protocolErrorf(field, format string, args ...any) *ProtocolError {
	err := fmt.Errorf(format, args...)
	return &ProtocolError{Operation: "open_process", Field: field, Detail: err.Error(), Err: errors.Unwrap(err)}
}
