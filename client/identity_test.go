//go:build linux

package client_test

import (
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/server"
)

func TestFramesInOutputForgeNothing(t *testing.T) {
	e := newEnv(t, server.Config{})
	c := ctx(t)
	forged := `{"type":"exit","code":9}` + "\n" +
		`{"type":"stdout_eof","off":0}` + "\n" +
		`{"type":"destroyed","process_id":"0123456789abcdef0123456789abcdef"}` + "\n"
	p := open(t, e.url, req("printf", "%s", forged), nil)
	require.Equal(t, forged, readAll(t, c, p.Stdout()))
	st, err := p.Wait(c)
	require.NoError(t, err)
	require.Equal(t, client.ExitStatus{}, st)
}

func TestServerEnvironmentNotVisible(t *testing.T) {
	t.Setenv("PROCWIRE_TEST_SERVER_SECRET", "leaked")
	e := newEnv(t, server.Config{})
	c := ctx(t)
	r := req("env")
	r.Environment["ASKED"] = "for"
	p := open(t, e.url, r, nil)
	out := readAll(t, c, p.Stdout())
	require.NotContains(t, out, "PROCWIRE_TEST_SERVER_SECRET")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.ElementsMatch(t, []string{"ASKED=for", "PATH=" + r.Environment["PATH"]}, lines)
}

func TestEvidenceMatchesRequest(t *testing.T) {
	e := newEnv(t, server.Config{})
	r := req("echo", "a", "b c")
	p := open(t, e.url, r, nil)
	ev := p.Evidence()
	require.Equal(t, frames.WireRevision, ev.WireRevision)
	require.Equal(t, instanceID(t), ev.InstanceID)
	require.Equal(t, p.ID(), ev.ProcessID)
	require.Equal(t, r.Executable, ev.Executable)
	require.Equal(t, r.WorkingDirectory, ev.WorkingDirectory)
	require.Equal(t, frames.ArgumentsDigest(r.Arguments), ev.ArgumentsDigest)
}

// Evidence of opened that differs from the request is caught, named, and
// the process destroyed; fields the server authors freely are not checked.
func TestEvidenceTamperedAtOpen(t *testing.T) {
	tamper := map[string]func(e *frames.Evidence){
		"wire_revision":     func(e *frames.Evidence) { e.WireRevision = "procwire.v2" },
		"instance_id":       func(e *frames.Evidence) { e.InstanceID += "x" },
		"process_id":        func(e *frames.Evidence) { e.ProcessID = strings.Repeat("f", 32) },
		"executable":        func(e *frames.Evidence) { e.Executable = "/bin/cat" },
		"working_directory": func(e *frames.Evidence) { e.WorkingDirectory = "/tmp/" },
		"arguments_digest":  func(e *frames.Evidence) { e.ArgumentsDigest = frames.ArgumentsDigest([]string{"-n"}) },
		"provider":          nil, // free: no error
	}
	for field, change := range tamper {
		t.Run(field, func(t *testing.T) {
			destroyed := make(chan struct{})
			f := newFake(t, func(fc *fakeConn, first frames.Frame) {
				o := opened(first.(*frames.Open))
				if change != nil {
					change(&o.Evidence)
				} else {
					o.Evidence.Provider = "another"
				}
				fc.send(o)
				next, ok := fc.recv()
				if ok && change != nil {
					require.Equal(t, &frames.Destroy{}, next)
					fc.send(&frames.Exit{Signal: "SIGKILL"})
					fc.send(&frames.Destroyed{ProcessID: fakeID})
					close(destroyed)
				}
			})
			c := ctx(t)
			p, err := client.Open(c, f.url, "inst-1", req("cat", "-u"), nil)
			if change == nil {
				require.NoError(t, err)
				require.NoError(t, p.Destroy(c))
				<-f.destroys
				return
			}
			var pe *client.ProtocolError
			require.ErrorAs(t, err, &pe)
			if field == "wire_revision" {
				// Refused already by the decoder: not a procwire.v1 frame.
				require.Equal(t, "opened.evidence.wire_revision", pe.Field)
			} else {
				require.Equal(t, "open_process_identity", pe.Operation)
				require.Equal(t, "evidence."+field, pe.Field)
			}
			await(t, c, destroyed, "the destroy")
		})
	}
}

// A resumed whose evidence differs from opened's ends the handle with a
// ProtocolError naming the field, on the pending and every later call, and
// the process is destroyed.
func TestEvidenceTamperedAtResume(t *testing.T) {
	cut := make(chan struct{})
	f := resumeFake(t, cut, func(fc *fakeConn, r *frames.Resume) {
		ev := fakeEvidence()
		ev.StartedAt = "2026-11-29T09:30:00.001Z"
		fc.send(&frames.Resumed{ProcessID: fakeID, Evidence: ev, StdinLimit: 4096})
	})
	p := openFake(t, f)
	isField := func(err error) {
		var pe *client.ProtocolError
		require.ErrorAs(t, err, &pe)
		require.Equal(t, "open_process_identity", pe.Operation)
		require.Equal(t, "evidence.started_at", pe.Field)
	}
	isField(cutWhileReading(t, p, cut))
	assertEnded(t, p, f, isField)
}

// A replay gap is a typed error on the pending and every later call, and
// the process, which still runs, is destroyed.
func TestReplayGap(t *testing.T) {
	cut := make(chan struct{})
	f := resumeFake(t, cut, func(fc *fakeConn, r *frames.Resume) {
		fc.send(&frames.Error{Code: frames.OperationFailed, Operation: "resume_process", Reason: "replay_gap",
			Gap: &frames.Gap{Requested: 0, Oldest: 10}})
	})
	p := openFake(t, f)
	isGap := func(err error) {
		var re *client.RemoteError
		require.ErrorAs(t, err, &re)
		require.Equal(t, frames.OperationFailed, re.Frame.Code)
		require.Equal(t, "replay_gap", re.Frame.Reason)
		require.Equal(t, &frames.Gap{Requested: 0, Oldest: 10}, re.Frame.Gap)
	}
	isGap(cutWhileReading(t, p, cut))
	assertEnded(t, p, f, isGap)
}

// An expired process is a typed error too, and is not destroyed again.
func TestResumeExpired(t *testing.T) {
	cut := make(chan struct{})
	f := resumeFake(t, cut, func(fc *fakeConn, r *frames.Resume) {
		fc.send(&frames.Error{Code: frames.LifecycleConflict, Operation: "resume_process", Expected: "running", Actual: "process_expired"})
	})
	p := openFake(t, f)
	err := cutWhileReading(t, p, cut)
	var re *client.RemoteError
	require.ErrorAs(t, err, &re)
	require.Equal(t, "process_expired", re.Frame.Actual)
	_, err = p.Wait(ctx(t))
	require.ErrorAs(t, err, &re)
	require.NoError(t, p.Destroy(ctx(t)), "a destroy asked for goes to the server")
	require.Len(t, f.destroys, 1)
}

// Server frames that break the protocol end the handle with a
// ProtocolError naming the field, and the process is destroyed.
func TestServerBreaksProtocol(t *testing.T) {
	data := func(n int) []byte { return make([]byte, n) }
	cases := []struct {
		name   string
		frames []frames.Frame
		raw    string
		field  string
		detail string
		exit   *client.ExitStatus // settled before the violation
	}{
		{name: "stdout past the window", frames: []frames.Frame{&frames.Stdout{Off: 0, Data: data(1024)}, &frames.Stdout{Off: 1024, Data: data(4096 - 1024 + 1)}},
			field: "stdout.data", detail: "received 4097 bytes, allowed 4096"},
		{name: "stdout over max_data", frames: []frames.Frame{&frames.Stdout{Off: 0, Data: data(4097)}},
			field: "stdout.data", detail: "4097 bytes, max_data is 4096"},
		{name: "stderr over max_data", frames: []frames.Frame{&frames.Stderr{Off: 0, Data: data(4097)}},
			field: "stderr.data", detail: "4097 bytes, max_data is 4096"},
		{name: "stdout gap", frames: []frames.Frame{&frames.Stdout{Off: 5, Data: data(1)}}, field: "stdout.off"},
		{name: "stdout eof early", frames: []frames.Frame{&frames.Stdout{Off: 0, Data: data(2)}, &frames.StdoutEOF{Off: 1}}, field: "stdout_eof.off"},
		{name: "second different exit", frames: []frames.Frame{&frames.Exit{Code: 0}, &frames.Exit{Code: 0}, &frames.Exit{Code: 1}},
			field: "exit", exit: &client.ExitStatus{}},
		{name: "undecodable", raw: `{"type":"stdout","off":0,"data":"!!!!"}` + "\n", field: "stdout.data"},
		// One byte over, counting the '\n' a message goes without: the
		// decoder refuses it.
		{name: "line too long", raw: "{" + strings.Repeat(" ", frames.MaxLine-1), field: ""},
		// Over the WebSocket read limit: the connection is closed with
		// 1009, and that is the server's violation too, not a lost
		// connection to resume.
		{name: "message too big", raw: "{" + strings.Repeat(" ", frames.MaxLine) + "}\n", field: ""},
		{name: "client frame", frames: []frames.Frame{&frames.Ack{Stdout: 0}}, field: "ack"},
		{name: "stdin credit beyond sent", frames: []frames.Frame{&frames.Credit{StdinReceived: 1, StdinLimit: 4097}}, field: "credit.stdin_received"},
		{name: "stdin credit beyond a window", frames: []frames.Frame{&frames.Credit{StdinReceived: 0, StdinLimit: 4097}}, field: "credit.stdin_limit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, func(fc *fakeConn, first frames.Frame) {
				o, ok := first.(*frames.Open)
				if !ok { // a client that missed the violation resumes
					fc.send(&frames.Error{Code: frames.LifecycleConflict, Operation: "resume_process", Actual: "process_not_found"})
					return
				}
				fc.send(opened(o))
				for _, fr := range tc.frames {
					fc.send(fr)
				}
				if tc.raw != "" {
					fc.sendRaw([]byte(tc.raw))
				}
				fc.drain(nil)
			})
			p := openFake(t, f)
			c := ctx(t)
			st, err := p.Wait(c)
			if tc.exit != nil {
				require.NoError(t, err)
				require.Equal(t, *tc.exit, st)
			}
			assertEnded(t, p, f, func(err error) {
				if tc.exit != nil && err == nil {
					return // Wait settled with the exit
				}
				var pe *client.ProtocolError
				require.ErrorAs(t, err, &pe)
				require.Equal(t, tc.field, pe.Field, "%v", pe)
				if tc.detail != "" {
					require.Equal(t, tc.detail, pe.Detail)
				}
			})
		})
	}
}

// A process resumed on another connection (close 4001) ends the handle:
// the client does not fight over it, and does not destroy it.
func TestResumedElsewhere(t *testing.T) {
	cut := make(chan struct{})
	resumes := make(chan struct{}, 1)
	f := newFake(t, func(fc *fakeConn, first frames.Frame) {
		switch first := first.(type) {
		case *frames.Open:
			fc.send(opened(first))
			<-cut
			fc.ws.Close(frames.CloseResumedElsewhere, frames.ReasonResumedElsewhere)
		case *frames.Resume:
			resumes <- struct{}{}
		}
	})
	p := openFake(t, f)
	err := cutWhileReading(t, p, cut)
	require.ErrorIs(t, err, client.ErrConnectionLost)
	_, err = p.Wait(ctx(t))
	require.ErrorIs(t, err, client.ErrConnectionLost)
	require.Empty(t, resumes)
	require.Empty(t, f.destroys)
}

// A server that refuses the connection for good (close 1002) leaves a
// process the client cannot use: it is destroyed.
func TestServerClosesWithProtocolError(t *testing.T) {
	cut := make(chan struct{})
	f := newFake(t, func(fc *fakeConn, first frames.Frame) {
		if o, ok := first.(*frames.Open); ok {
			fc.send(opened(o))
			<-cut
			fc.ws.Close(websocket.StatusProtocolError, "ack.stdout 5 beyond 0 sent")
		}
	})
	p := openFake(t, f)
	isLost := func(err error) { require.ErrorIs(t, err, client.ErrConnectionLost) }
	isLost(cutWhileReading(t, p, cut))
	assertEnded(t, p, f, isLost)
}
