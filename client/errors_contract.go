package client

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/coder/websocket"

	"github.com/procwire/procwire/frames"
)

// ContractError is an error of the sandbox provider contract's closed
// vocabulary, as the Runner sees it: Tag is the contract's name
// ("SandboxOperationFailed", "SandboxLifecycleConflict", ...) and the other
// fields are its data, empty when absent. Contract turns the errors of this
// package into one; the TypeScript client's errors carry the same _tag and
// fields for the same conditions (frames/testdata/client-errors.json, which
// both clients' tests read).
type ContractError struct {
	Tag         string
	Operation   string
	Reason      string
	Expected    string
	Actual      string
	Requirement string
	// Err is the error it was made from.
	Err error
}

// Error reads "<Tag> operation=... reason=..." with the fields present.
func (e *ContractError) Error() string {
	var b strings.Builder
	b.WriteString(e.Tag)
	for _, kv := range [...][2]string{
		{"operation", e.Operation}, {"reason", e.Reason}, {"expected", e.Expected},
		{"actual", e.Actual}, {"requirement", e.Requirement},
	} {
		if kv[1] != "" {
			b.WriteString(" " + kv[0] + "=" + kv[1])
		}
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the error it was made from.
func (e *ContractError) Unwrap() error { return e.Err }

// Reasons of SandboxOperationFailed for the transport's conditions, the
// same in both clients (frames/testdata/client-errors.json).
const (
	ReasonConnectionLost    = "connection_lost"
	ReasonResumedElsewhere  = "resumed_elsewhere"
	ReasonTimedOut          = "timed_out"
	ReasonProtocolViolation = "protocol_violation"
	ReasonEvidenceMismatch  = "evidence_mismatch"
	ReasonConnectionFailed  = "connection_failed"
	ReasonUnauthorized      = "unauthorized"
	ReasonServerShutdown    = "server_shutdown"
)

// Contract returns the contract's adapter error that err, returned by a
// call of this package for the contract operation op ("open_process",
// "wait_process", "read_stdout", "write_stdin", "signal_process",
// "destroy_process"), means; nil when err is nil or the caller's own
// cancellation (context.Canceled, returned as it is). It never returns
// SandboxProtocolInvalid, which belongs to the Runtime: a server that broke
// the wire is SandboxOperationFailed{reason: "protocol_violation"}.
//
// The conditions, in the order they are told apart:
//
//	stdin written after its close    SandboxLifecycleConflict{op, stdin_open, stdin_closed}
//	the grace ran out (ErrExpired)   SandboxLifecycleConflict{op, running, process_expired}
//	after Destroy (ErrDestroyed)     SandboxLifecycleConflict{op, running, process_destroyed}
//	evidence that does not match     SandboxOperationFailed{open_process_identity, evidence_mismatch}
//	any other *ProtocolError         SandboxOperationFailed{op, protocol_violation}
//	close 4001                       SandboxOperationFailed{op, resumed_elsewhere}
//	error server_shutdown, close 1001 SandboxOperationFailed{op, server_shutdown}
//	an error frame from the server   its own code and fields
//	upgrade answered 401 or 403      SandboxOperationFailed{op, unauthorized}
//	ErrConnectionLost                SandboxOperationFailed{op, connection_lost}
//	a bound of the client's passed   SandboxOperationFailed{op, timed_out}
//	any other failure (a dial)       SandboxOperationFailed{op, connection_failed}
func Contract(err error, op string) *ContractError {
	if err == nil {
		return nil
	}
	if ce, ok := errors.AsType[*ContractError](err); ok {
		return ce
	}
	failed := func(op, reason string) *ContractError {
		return &ContractError{Tag: string(frames.OperationFailed), Operation: op, Reason: reason, Err: err}
	}
	conflict := func(expected, actual string) *ContractError {
		return &ContractError{Tag: string(frames.LifecycleConflict), Operation: op, Expected: expected, Actual: actual, Err: err}
	}
	re, remote := errors.AsType[*RemoteError](err)
	switch {
	case errors.Is(err, ErrStdinClosed):
		return conflict("stdin_open", "stdin_closed")
	case errors.Is(err, ErrExpired):
		return conflict("running", "process_expired")
	case errors.Is(err, ErrDestroyed):
		return conflict("running", "process_destroyed")
	}
	if pe, ok := errors.AsType[*ProtocolError](err); ok {
		if pe.Operation == identityOperation {
			return failed(identityOperation, ReasonEvidenceMismatch)
		}
		return failed(op, ReasonProtocolViolation)
	}
	switch {
	case websocket.CloseStatus(err) == frames.CloseResumedElsewhere:
		return failed(op, ReasonResumedElsewhere)
	case remote && re.Frame.Reason == ReasonServerShutdown,
		websocket.CloseStatus(err) == websocket.StatusGoingAway:
		return failed(op, ReasonServerShutdown)
	case remote:
		f := &re.Frame
		return &ContractError{Tag: string(f.Code), Operation: f.Operation, Reason: f.Reason, Expected: f.Expected,
			Actual: f.Actual, Requirement: f.Requirement, Err: err}
	}
	if he, ok := errors.AsType[*httpError](err); ok &&
		(he.StatusCode == http.StatusUnauthorized || he.StatusCode == http.StatusForbidden) {
		return failed(op, ReasonUnauthorized)
	}
	switch {
	case errors.Is(err, ErrConnectionLost):
		return failed(op, ReasonConnectionLost)
	case errors.Is(err, context.DeadlineExceeded):
		return failed(op, ReasonTimedOut)
	case errors.Is(err, context.Canceled):
		return nil
	}
	return failed(op, ReasonConnectionFailed)
}
