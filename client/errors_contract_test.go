//go:build linux

package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/server"
)

// contractTable is frames/testdata/client-errors.json, which the
// TypeScript client's test reads too: both clients map each condition to
// the same contract error.
type contractTable struct {
	Conditions []struct {
		Condition string            `json:"condition"`
		Operation string            `json:"operation"`
		Error     map[string]string `json:"error"`
	} `json:"conditions"`
}

// contractFields is a ContractError as the table writes it: _tag and the
// fields present.
func contractFields(e *client.ContractError) map[string]string {
	m := map[string]string{"_tag": e.Tag}
	for k, v := range map[string]string{"operation": e.Operation, "reason": e.Reason, "expected": e.Expected,
		"actual": e.Actual, "requirement": e.Requirement} {
		if v != "" {
			m[k] = v
		}
	}
	return m
}

// TestContractErrors: every condition of the shared table, produced the way
// the client produces it — for real against a server where that is quick
// (a refused token, a refused dial, a call after destroy, stdin after its
// close), else built with the client's own wrapping — maps to exactly the
// table's error.
func TestContractErrors(t *testing.T) {
	b, err := os.ReadFile("../frames/testdata/client-errors.json")
	require.NoError(t, err)
	var table contractTable
	require.NoError(t, json.Unmarshal(b, &table))

	e := newEnv(t, server.Config{Token: "contract-token"})
	c := ctx(t)
	withToken := func() *client.Options { o := fastOpts(); o.Token = "contract-token"; return o }

	// Real errors.
	_, unauthorized := client.Open(c, e.url, instanceID(t), req("cat"), fastOpts())
	require.Error(t, unauthorized)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedURL := "ws://" + ln.Addr().String()
	require.NoError(t, ln.Close())
	_, refused := client.Open(c, closedURL, instanceID(t), req("cat"), fastOpts())
	require.Error(t, refused)

	p := open(t, e.url, req("cat"), withToken())
	require.NoError(t, p.Stdin().Close())
	_, stdinClosed := p.Stdin().Write([]byte("late"))
	require.Error(t, stdinClosed)
	require.NoError(t, p.Destroy(c))
	_, destroyed := p.Signal(c, frames.SIGTERM)
	require.Error(t, destroyed)

	produced := map[string]error{
		"unauthorized":      unauthorized,
		"connection_failed": refused,
		"stdin_closed":      stdinClosed,
		"destroyed":         destroyed,
		// Built as supervisor.go, process.go and machine.go build them.
		"connection_lost": fmt.Errorf("%w: no resume within the %v grace: %w", client.ErrConnectionLost, 10*time.Second,
			errors.New("dial tcp 127.0.0.1:1: connect: connection refused")),
		"resumed_elsewhere": fmt.Errorf("%w: the process was resumed on another connection: %w", client.ErrConnectionLost,
			websocket.CloseError{Code: frames.CloseResumedElsewhere, Reason: frames.ReasonResumedElsewhere}),
		"timed_out": fmt.Errorf("procwire: destroy: no answer within the %v DestroyTimeout: %w", time.Second,
			context.DeadlineExceeded),
		"protocol_violation": client.ProtocolViolation(),
		"evidence_mismatch":  client.EvidenceMismatch(),
		"server_shutdown": fmt.Errorf("%w: %d resumes in a row failed, the last: %w", client.ErrConnectionLost, 3,
			&client.RemoteError{Frame: frames.Error{Code: frames.OperationFailed, Operation: "resume_process", Reason: "server_shutdown"}}),
		"expired": fmt.Errorf("%w: no connection for the %v grace", client.ErrExpired, 10*time.Second),
	}
	require.Len(t, table.Conditions, len(produced), "a condition of the table without a Go error, or the reverse")
	for _, cond := range table.Conditions {
		err, ok := produced[cond.Condition]
		require.True(t, ok, "condition %s has no Go error here", cond.Condition)
		got := client.Contract(err, cond.Operation)
		require.NotNil(t, got, "%s: %v", cond.Condition, err)
		require.Equal(t, cond.Error, contractFields(got), "%s: %v", cond.Condition, err)
		require.ErrorIs(t, got, err, "%s: the contract error wraps the client's", cond.Condition)
		require.NotEqual(t, "SandboxProtocolInvalid", got.Tag)
	}

	// A server shutting down as a close 1001 alone, and the caller's own
	// cancellation, which is no contract error.
	require.Equal(t, client.ReasonServerShutdown, client.Contract(fmt.Errorf("%w: %w", client.ErrConnectionLost,
		websocket.CloseError{Code: websocket.StatusGoingAway}), "read_stdout").Reason)
	require.Nil(t, client.Contract(context.Canceled, "wait_process"))
	require.Nil(t, client.Contract(nil, "wait_process"))
	// An error frame keeps its own code and fields.
	got := client.Contract(&client.RemoteError{Frame: frames.Error{Code: frames.LifecycleConflict, Operation: "open_process",
		Actual: "process_already_open"}}, "open_process")
	require.Equal(t, map[string]string{"_tag": "SandboxLifecycleConflict", "operation": "open_process", "actual": "process_already_open"}, contractFields(got))
}
