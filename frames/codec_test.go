package frames_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/procwire/procwire/frames"
)

const (
	pid   = "8f3a0c1e5b7d49a2b6c4e0f1a2b3c4d5"
	token = "3b0e8c1d2f4a6b8c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c"
)

func evidence() frames.Evidence {
	return frames.Evidence{
		WireRevision: frames.WireRevision, Provider: "procwire", ProviderRevision: "0.1.0",
		InstanceID: "inst-1", ProcessID: pid, Executable: "cat", WorkingDirectory: "/tmp",
		ArgumentsDigest: frames.ArgumentsDigest([]string{"-u"}),
		StartedAt:       frames.FormatTime(time.Date(2026, 11, 29, 9, 30, 0, 0, time.UTC)),
	}
}

// sampleFrames has one or more valid frames of every type.
func sampleFrames() []frames.Frame {
	return []frames.Frame{
		&frames.Open{InstanceID: "inst-1", Request: frames.ProcessRequest{
			Executable: "cat", Arguments: []string{"-u", "", "é\n\"\\\x01"}, WorkingDirectory: "/tmp",
			Environment: map[string]string{"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "_": ""},
		}, StdoutWindow: 4 << 20},
		&frames.Open{InstanceID: "i", Request: frames.ProcessRequest{Executable: "/bin/true", WorkingDirectory: "/"}},
		&frames.Resume{ProcessID: pid, Token: token, StdoutReceived: 1 << 20, StderrReceived: 12},
		&frames.Resume{ProcessID: pid, Token: token},
		&frames.Stdin{Off: 0, Data: []byte("hello\n")},
		&frames.StdinClose{Off: 6},
		&frames.Ack{Stdout: 9223372036854775807},
		&frames.Signal{ID: 1, Signal: frames.SIGTERM},
		&frames.Destroy{},
		&frames.Destroy{ProcessID: pid, Token: token},
		&frames.Opened{ProcessID: pid, Token: token, Evidence: evidence(), StdinLimit: 1 << 20,
			StdoutWindow: 4 << 20, StderrWindow: 64 << 10, GraceMS: 30000, HeartbeatMS: 15000,
			ExitWaitMS: 1000, MaxData: frames.MaxData},
		&frames.Resumed{ProcessID: pid, Evidence: evidence(), StdinReceived: 5, StdinLimit: 1048581},
		&frames.Credit{StdinReceived: 6, StdinLimit: 1048582},
		&frames.Stdout{Off: 0, Data: bytes.Repeat([]byte{0xff}, frames.MaxData)},
		&frames.StdoutEOF{Off: 6},
		&frames.Stderr{Off: 3, Data: []byte("warning\n")},
		&frames.Exit{Code: 0},
		&frames.Exit{Code: 255},
		&frames.Exit{Signal: "SIGRTMIN+32"},
		&frames.Signaled{ID: 1, Result: frames.SignalDelivered},
		&frames.Destroyed{ProcessID: pid},
		&frames.Error{Code: frames.OperationFailed, Operation: "resume_process", Reason: "replay_gap",
			Gap: &frames.Gap{Requested: 0, Oldest: 4096}},
		&frames.Error{Code: frames.SnapshotNotFound, Message: "no\tsuch"},
	}
}

func TestRoundTrip(t *testing.T) {
	var d frames.Decoder
	d.MaxLine = frames.MaxFirstLine
	for _, f := range sampleFrames() {
		if err := frames.Validate(f); err != nil {
			t.Fatalf("Validate(%T): %v", f, err)
		}
		line := frames.Append(nil, f)
		if line[len(line)-1] != '\n' || bytes.Count(line, []byte("\n")) != 1 {
			t.Fatalf("%T: not one line: %q", f, line)
		}
		got, err := d.Decode(line)
		if err != nil {
			t.Fatalf("Decode(%.80s): %v", line, err)
		}
		if !frames.Equal(f, got) {
			t.Fatalf("%T: decoded %+v, want %+v", f, got, f)
		}
		if again := frames.Append(nil, got); !bytes.Equal(again, line) {
			t.Fatalf("re-encoded %q, want %q", again, line)
		}
		fresh, err := frames.Decode(line[:len(line)-1])
		if err != nil || !frames.Equal(fresh, f) {
			t.Fatalf("Decode without newline: %v", err)
		}
	}
}

func TestReaderChunking(t *testing.T) {
	var all []byte
	fs := sampleFrames()
	for _, f := range fs {
		all = frames.Append(all, f)
	}
	wrappers := map[string]func(io.Reader) io.Reader{
		"plain":   func(r io.Reader) io.Reader { return r },
		"onebyte": iotest.OneByteReader,
		"half":    iotest.HalfReader,
		"dataerr": iotest.DataErrReader,
	}
	for name, wrap := range wrappers {
		t.Run(name, func(t *testing.T) {
			r := frames.NewReader(wrap(bytes.NewReader(all)), frames.MaxLine)
			for i, want := range fs {
				got, err := r.Next()
				if err != nil {
					t.Fatalf("frame %d: %v", i, err)
				}
				if !frames.Equal(got, want) {
					t.Fatalf("frame %d: got %+v", i, got)
				}
			}
			if _, err := r.Next(); err != io.EOF {
				t.Fatalf("at end: %v, want io.EOF", err)
			}
		})
	}
}

func TestReaderLimits(t *testing.T) {
	in := "{\"type\":\"ack\",\"stdout\":1}\n" + strings.Repeat("x", 100) + "\n{\"type\":\"ack\",\"stdout\":2}\n{\"type\""
	r := frames.NewReader(iotest.OneByteReader(strings.NewReader(in)), 32)
	if f, err := r.Next(); err != nil || f.(*frames.Ack).Stdout != 1 {
		t.Fatalf("first: %v %v", f, err)
	}
	if _, err := r.Next(); !errors.Is(err, frames.ErrLineTooLong) {
		t.Fatalf("long line: %v", err)
	}
	if r.Buffered() > 4096 {
		t.Fatalf("buffered %d", r.Buffered())
	}
	if f, err := r.Next(); err != nil || f.(*frames.Ack).Stdout != 2 {
		t.Fatalf("after long line: %v %v", f, err)
	}
	if _, err := r.Next(); err != io.ErrUnexpectedEOF {
		t.Fatalf("partial last line: %v", err)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after partial: %v", err)
	}
}

// Into receives the payload of a canonical data frame of the types it
// accepts; a frame in another form, a type it declines and a short buffer
// all leave the payload in the Decoder's own buffer, with the same result.
func TestDecoderInto(t *testing.T) {
	into := make([]byte, 64)
	var asked []frames.Type
	d := frames.Decoder{Into: func(ty frames.Type, n int) []byte {
		asked = append(asked, ty)
		switch ty {
		case frames.TypeStdout:
			return into[:n]
		case frames.TypeStdin:
			return into[:n-1] // too short: ignored
		}
		return nil
	}}
	aliases := func(f frames.Frame) bool {
		var data []byte
		switch f := f.(type) {
		case *frames.Stdout:
			data = f.Data
		case *frames.Stderr:
			data = f.Data
		case *frames.Stdin:
			data = f.Data
		}
		return &data[0] == &into[0]
	}
	for _, c := range []struct {
		line    string
		aliases bool
	}{
		{`{"type":"stdout","off":7,"data":"aGVsbG8="}`, true},
		{`{"type":"stderr","off":7,"data":"aGVsbG8="}`, false},
		{`{"type":"stdin","off":7,"data":"aGVsbG8="}`, false},
		{`{"off":7,"type":"stdout","data":"aGVsbG8="}`, false}, // not canonical
	} {
		clear(into)
		f, err := d.Decode([]byte(c.line))
		if err != nil {
			t.Fatalf("%s: %v", c.line, err)
		}
		want, _ := frames.Decode([]byte(c.line))
		if got, w := string(frames.Append(nil, f)), string(frames.Append(nil, want)); got != w {
			t.Fatalf("%s: decoded as %s, want %s", c.line, got, w)
		}
		if aliases(f) != c.aliases {
			t.Fatalf("%s: payload in Into's buffer: %v, want %v", c.line, aliases(f), c.aliases)
		}
	}
	if len(asked) != 3 {
		t.Fatalf("Into asked %d times (%v), want once per canonical frame", len(asked), asked)
	}
}
