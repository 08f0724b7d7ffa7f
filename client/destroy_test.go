//go:build linux

package client_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/internal/testkit/stubborn"
	"github.com/procwire/procwire/server"
)

func TestDestroyIdempotent(t *testing.T) {
	e := newEnv(t, server.Config{})
	c := ctx(t)

	t.Run("twice", func(t *testing.T) {
		p := open(t, e.url, req("sleep", "300"), nil)
		require.NoError(t, p.Destroy(c))
		require.NoError(t, p.Destroy(c))
		st, err := p.Wait(c)
		require.NoError(t, err)
		require.Equal(t, client.ExitStatus{Signal: "SIGKILL"}, st)
		_, err = p.Stdout().ReadContext(c, make([]byte, 1))
		// Never io.EOF: a destroyed stream has none, even when the kill
		// closed the child's stdout before the destroy settled.
		require.ErrorIs(t, err, client.ErrDestroyed)
		_, err = p.Stdin().WriteContext(c, []byte("x"))
		require.ErrorIs(t, err, client.ErrDestroyed)
		_, err = p.Signal(c, frames.SIGTERM)
		require.ErrorIs(t, err, client.ErrDestroyed)
	})
	t.Run("concurrently", func(t *testing.T) {
		p := open(t, e.url, req("sleep", "300"), nil)
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() { errs[i] = p.Destroy(c) })
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
	})
	t.Run("after exit", func(t *testing.T) {
		p := open(t, e.url, req("true"), nil)
		st, err := p.Wait(c)
		require.NoError(t, err)
		require.True(t, st.Success())
		require.NoError(t, p.Destroy(c))
		require.NoError(t, p.Destroy(c))
		again, err := p.Wait(c)
		require.NoError(t, err)
		require.Equal(t, st, again)
	})
}

// The destroy reaches the server but its answer is lost with the
// connection: the client repeats it on a new connection, as a first frame,
// and settles the same way.
func TestDestroyAfterLostAnswer(t *testing.T) {
	e := newEnv(t, server.Config{})
	c := ctx(t)
	p := open(t, e.purl, sh("echo ready; exec sleep 300"), nil)
	require.Equal(t, "ready\n", readLine(t, c, p.Stdout()))
	require.Len(t, e.srv.Stats().Processes, 1)

	e.proxy.DropReplies(true)
	done := make(chan error, 1)
	go func() { done <- p.Destroy(c) }()
	eventually(t, c, "the server to destroy the process", func() bool { return len(e.srv.Stats().Processes) == 0 })
	e.proxy.DropReplies(false)
	e.proxy.CutAll()
	require.NoError(t, <-done)
	require.NoError(t, p.Destroy(c))
	st, err := p.Wait(c)
	require.NoError(t, err)
	require.Equal(t, client.ExitStatus{Signal: "SIGKILL"}, st)
	require.GreaterOrEqual(t, e.proxy.Accepted(), 2)
}

func TestSecondOpenRefused(t *testing.T) {
	e := newEnv(t, server.Config{})
	c := ctx(t)
	p := open(t, e.url, req("sleep", "300"), nil)
	_, err := client.Open(c, e.url, instanceID(t), req("true"), nil)
	var re *client.RemoteError
	require.ErrorAs(t, err, &re)
	require.Equal(t, frames.LifecycleConflict, re.Frame.Code)
	require.Equal(t, "open_process", re.Frame.Operation)
	require.Equal(t, "process_already_open", re.Frame.Actual)

	// The reservation lasts until destroy, even after the exit.
	require.NoError(t, p.Destroy(c))
	q, err := client.Open(c, e.url, instanceID(t), req("true"), nil)
	require.NoError(t, err)
	require.NoError(t, q.Destroy(c))
}

func TestDestroyKillsGroup(t *testing.T) {
	e := newEnv(t, server.Config{})
	c := ctx(t)
	p := open(t, e.url, sh("sleep 300 & echo $!; wait"), nil)
	sleeper, err := strconv.Atoi(strings.TrimSpace(readLine(t, c, p.Stdout())))
	require.NoError(t, err)
	st := e.srv.Stats()
	require.Len(t, st.Processes, 1)
	pgid := st.Processes[0].Pid
	require.Equal(t, []int{pgid, sleeper}, liveGroup(t, pgid))

	require.NoError(t, p.Destroy(c))
	require.Empty(t, liveGroup(t, pgid), "no process of the group is left")
}

// liveGroup lists the processes of group pgid that are not zombies, in
// ascending pid order.
func liveGroup(t *testing.T, pgid int) []int {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	require.NoError(t, err)
	var pids []int
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			continue // gone meanwhile
		}
		require.NoError(t, err)
		// pid (comm) state ppid pgrp ...; comm may hold spaces.
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if fields[0] == "Z" || fields[2] != strconv.Itoa(pgid) {
			continue
		}
		pid, _ := strconv.Atoi(strings.Fields(s)[0])
		pids = append(pids, pid)
	}
	return pids
}

// A destroy the server could not complete returns its error at once (not
// after DestroyTimeout), the handle stays usable, and Destroy again tries
// again on the same connection and settles.
func TestDestroyFailsThenRetries(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Config{Executor: stubborn.Executor{Executor: server.BridgeExecutor{}}})
	c := ctx(t)
	p := open(t, e.purl, req("cat"), &client.Options{DestroyTimeout: time.Minute})
	start := time.Now()
	err := p.Destroy(c)
	var re *client.RemoteError
	require.ErrorAs(t, err, &re)
	require.Equal(t, "destroy_process", re.Frame.Operation)
	require.Equal(t, "processes_survived", re.Frame.Reason)
	require.Less(t, time.Since(start), 30*time.Second, "the error, not DestroyTimeout")

	// The process still runs, and the handle still drives it.
	_, err = p.Stdin().Write([]byte("still here\n"))
	require.NoError(t, err)
	require.Equal(t, "still here\n", readLine(t, c, p.Stdout()))

	require.NoError(t, p.Destroy(c))
	require.NoError(t, p.Destroy(c), "settled: idempotent")
	require.Equal(t, 1, e.proxy.Accepted(), "one connection")
	require.Empty(t, e.srv.Stats().Processes)
}

// The same when the destroy goes out as the first frame of a new
// connection (the old one was lost): the error returns, the handle resumes
// the process, which still runs, and Destroy again settles.
func TestDestroyFailsOnANewConnection(t *testing.T) {
	t.Parallel()
	e := newEnv(t, server.Config{Executor: stubborn.Executor{Executor: server.BridgeExecutor{}}})
	c := ctx(t)
	p := open(t, e.purl, req("cat"), &client.Options{DestroyTimeout: time.Minute,
		ReconnectMin: 2 * time.Millisecond, ReconnectMax: 50 * time.Millisecond})
	e.proxy.Refuse(true)
	e.proxy.CutAll()
	errc := make(chan error, 1)
	go func() { errc <- p.Destroy(c) }()
	e.proxy.Refuse(false)
	var re *client.RemoteError
	require.ErrorAs(t, <-errc, &re)
	require.Equal(t, "processes_survived", re.Frame.Reason)

	_, err := p.Stdin().Write([]byte("resumed\n"))
	require.NoError(t, err)
	require.Equal(t, "resumed\n", readLine(t, c, p.Stdout()))
	require.NoError(t, p.Destroy(c))
	require.Empty(t, e.srv.Stats().Processes)
}
