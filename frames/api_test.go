package frames_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
	"unicode/utf8"

	"github.com/procwire/procwire/frames"
)

func TestHotPathsDoNotAllocate(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts")
	}
	hot := []frames.Frame{
		&frames.Stdin{Off: 7, Data: []byte("hello")},
		&frames.Stdout{Off: 1 << 40, Data: payload(32 << 10)},
		&frames.Stderr{Off: 0, Data: payload(frames.MaxData)},
		&frames.Ack{Stdout: 12},
		&frames.Credit{StdinReceived: 1, StdinLimit: 2},
		&frames.StdoutEOF{Off: 3},
		&frames.StdinClose{Off: 4},
		&frames.Ping{ID: frames.MaxPingID},
		&frames.Pong{ID: 9},
	}
	var d frames.Decoder
	buf := make([]byte, 0, 1<<20)
	w := frames.NewWriter(io.Discard)
	for _, f := range hot {
		line := frames.Append(nil, f)
		general := append([]byte("{ "), line[1:]...)
		if _, err := d.Decode(general); err != nil { // grow the buffers
			t.Fatal(err)
		}
		_ = w.WriteFrame(f)
		for name, fn := range map[string]func(){
			"Append":          func() { buf = frames.Append(buf[:0], f) },
			"Decode":          func() { _, _ = d.Decode(line) },
			"Decode(general)": func() { _, _ = d.Decode(general) },
			"WriteFrame":      func() { _ = w.WriteFrame(f) },
			"Validate":        func() { _ = frames.Validate(f) },
		} {
			if n := testing.AllocsPerRun(20, fn); n != 0 {
				t.Errorf("%s of %s: %v allocations", name, f.Type(), n)
			}
		}
	}
	var stream []byte
	for range 64 {
		stream = frames.Append(stream, hot[1])
	}
	r := frames.NewReader(&repeatReader{line: stream}, frames.MaxLine)
	_, _ = r.Next()
	if n := testing.AllocsPerRun(50, func() { _, _ = r.Next() }); n != 0 {
		t.Errorf("Reader.Next: %v allocations", n)
	}
}

func TestDecoderOwnership(t *testing.T) {
	var d frames.Decoder
	a, _ := d.Decode([]byte(`{"type":"stdout","off":0,"data":"YWFh"}`))
	b, _ := d.Decode([]byte(`{"type":"stdout","off":3,"data":"YmJi"}`))
	if a != b || string(b.(*frames.Stdout).Data) != "bbb" {
		t.Fatalf("hot frames are reused: %p %p %q", a, b, b.(*frames.Stdout).Data)
	}
	o1, _ := d.Decode([]byte(`{"type":"destroy"}`))
	o2, _ := d.Decode([]byte(`{"type":"destroy"}`))
	if o1 == o2 {
		t.Fatal("cold frames must be fresh")
	}
	c1, _ := frames.Decode([]byte(`{"type":"stdout","off":0,"data":"YWFh"}`))
	c2, _ := frames.Decode([]byte(`{"type":"stdout","off":0,"data":"YmJi"}`))
	if string(c1.(*frames.Stdout).Data) != "aaa" || string(c2.(*frames.Stdout).Data) != "bbb" {
		t.Fatal("Decode must give the caller its own data")
	}
}

func TestDecodeErrorConventions(t *testing.T) {
	_, err := frames.Decode([]byte(`{"type":"ack","stdout":-1}`))
	if !errors.Is(err, frames.ErrBadInteger) || errors.Is(err, frames.ErrSyntax) {
		t.Fatalf("errors.Is: %v", err)
	}
	if !errors.Is(err, &frames.DecodeError{Frame: "ack", Field: "stdout", Kind: frames.KindBadInteger}) ||
		errors.Is(err, &frames.DecodeError{Frame: "stdout", Kind: frames.KindBadInteger}) {
		t.Fatal("errors.Is with frame and field")
	}
	if got := err.Error(); !strings.HasPrefix(got, "ack.stdout: bad_integer") {
		t.Fatalf("Error() = %q", got)
	}
	long := &frames.DecodeError{Frame: "open", Field: strings.Repeat("é\n", 100), Kind: frames.KindUnknownField, Detail: strings.Repeat("x", 500)}
	if s := long.Error(); len(s) > 123 || !utf8.ValidString(s) || strings.ContainsRune(s, '\n') {
		t.Fatalf("long Error() = %q (%d bytes)", s, len(s))
	}
	if got := (&frames.DecodeError{Kind: frames.KindSyntax}).Error(); got != "syntax" {
		t.Fatalf("bare Error() = %q", got)
	}
	if got := (&frames.DecodeError{Field: "type", Kind: frames.KindMissingField}).Error(); got != "type: missing_field" {
		t.Fatalf("Error() without frame = %q", got)
	}
}

func TestValidateAndWriter(t *testing.T) {
	if err := frames.Validate(nil); !errors.Is(err, frames.ErrUnknownType) {
		t.Fatalf("Validate(nil) = %v", err)
	}
	bad := &frames.Exit{Code: 1, Signal: "SIGKILL"}
	if err := frames.Validate(bad); !errors.Is(err, frames.ErrBadExit) {
		t.Fatalf("Validate = %v", err)
	}
	var out bytes.Buffer
	w := frames.NewWriter(&out)
	if err := w.WriteFrame(bad); !errors.Is(err, frames.ErrBadExit) || out.Len() != 0 {
		t.Fatalf("WriteFrame of an invalid frame: %v, wrote %q", err, out.Bytes())
	}
	if err := w.WriteFrame(&frames.Exit{Signal: "SIGKILL"}); err != nil || out.String() != `{"type":"exit","signal":"SIGKILL"}`+"\n" {
		t.Fatalf("WriteFrame: %v %q", err, out.Bytes())
	}
	if err := frames.Validate(&frames.Open{InstanceID: "i", Request: frames.ProcessRequest{
		Executable: "x", WorkingDirectory: "/", Arguments: make([]string, 257)}}); !errors.Is(err,
		&frames.DecodeError{Frame: "open", Field: "request.arguments", Kind: frames.KindOutOfBounds}) {
		t.Fatalf("257 arguments: %v", err)
	}
}

func TestEqual(t *testing.T) {
	for _, c := range []struct {
		a, b frames.Frame
		eq   bool
	}{
		{&frames.Stdout{Data: nil}, &frames.Stdout{Data: []byte{}}, true},
		{&frames.Stdout{Data: []byte("a")}, &frames.Stderr{Data: []byte("a")}, false},
		{&frames.Error{Code: frames.FileTooLarge}, &frames.Error{Code: frames.FileTooLarge, Gap: &frames.Gap{}}, false},
		{&frames.Error{Gap: &frames.Gap{Oldest: 1}}, &frames.Error{Gap: &frames.Gap{Oldest: 1}}, true},
		{&frames.Open{Request: frames.ProcessRequest{Environment: map[string]string{}}}, &frames.Open{}, true},
		{&frames.Open{Request: frames.ProcessRequest{Arguments: []string{"a"}}}, &frames.Open{}, false},
		{nil, nil, true},
		{nil, &frames.Ack{}, false},
	} {
		if got := frames.Equal(c.a, c.b); got != c.eq {
			t.Errorf("Equal(%+v, %+v) = %v", c.a, c.b, got)
		}
	}
}

func TestValues(t *testing.T) {
	ts := time.Date(2026, 2, 28, 23, 59, 59, 999_999_999, time.FixedZone("x", 3600))
	if s := frames.FormatTime(ts); s != "2026-02-28T22:59:59.999Z" {
		t.Fatalf("FormatTime = %s", s)
	}
	if got, err := frames.ParseTime("2026-02-28T22:59:59.999Z"); err != nil || !got.Equal(ts.Truncate(time.Millisecond)) {
		t.Fatalf("ParseTime = %v, %v", got, err)
	}
	for _, s := range []string{"2026-02-30T00:00:00.000Z", "2026-02-28T22:59:59.999+00:00", "2026-02-28T22:59:59.99Z", ""} {
		if _, err := frames.ParseTime(s); !errors.Is(err, frames.ErrBadTimestamp) {
			t.Errorf("ParseTime(%q) = %v", s, err)
		}
	}
	// The digest by hand: count, then length and bytes of each argument.
	h := sha256.Sum256([]byte("\x00\x00\x00\x02\x00\x00\x00\x02-u\x00\x00\x00\x00"))
	if got := frames.ArgumentsDigest([]string{"-u", ""}); got != "sha256:"+hex.EncodeToString(h[:]) || !frames.ValidDigest(got) {
		t.Fatalf("ArgumentsDigest = %s", got)
	}
	for name, ok := range map[string]bool{"SIGKILL": true, "SIGSYS": true, "SIGRTMIN+0": true, "SIGRTMIN+32": true,
		"SIGRTMIN+33": false, "SIGRTMIN+": false, "SIGRTMIN+-1": false, "SIGRTMIN++1": false, "SIGRTMIN+01": false, "SIGKILL ": false} {
		if frames.ExitSignalName(name) != ok {
			t.Errorf("ExitSignalName(%q) != %v", name, ok)
		}
	}
	if !frames.ValidEnvKey("_a1") || frames.ValidEnvKey("1a") || !frames.ValidInstanceID("a:b.c-d_e") || frames.ValidInstanceID(".a") ||
		!frames.ValidProcessID(pid) || !frames.ValidToken(token) || frames.ValidToken(pid) {
		t.Error("pattern helpers")
	}
	if ty, ok := frames.ParseType("stdout_eof"); !ok || ty != frames.TypeStdoutEOF || ty.String() != "stdout_eof" || frames.Type(0).String() != "invalid" {
		t.Error("ParseType")
	}
}

func TestReaderEdges(t *testing.T) {
	ack := string(frames.Append(nil, &frames.Ack{Stdout: 1})) // 26 bytes with '\n'
	t.Run("exactly the limit", func(t *testing.T) {
		r := frames.NewReader(strings.NewReader(ack+ack), len(ack))
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
		r.SetMaxLine(len(ack) - 1)
		if _, err := r.Next(); !errors.Is(err, frames.ErrLineTooLong) {
			t.Fatalf("one over: %v", err)
		}
		if _, err := r.Next(); err != io.EOF {
			t.Fatalf("after: %v", err)
		}
	})
	t.Run("first line limit then MaxLine", func(t *testing.T) {
		open := frames.Append(nil, &frames.Open{InstanceID: "i", Request: frames.ProcessRequest{
			Executable: "x", WorkingDirectory: "/", Arguments: []string{strings.Repeat("a", 65536), strings.Repeat("\x01", 65536)}}})
		in := iotest.HalfReader(bytes.NewReader(append(open, ack...)))
		r := frames.NewReader(in, frames.MaxFirstLine)
		if f, err := r.Next(); err != nil || f.Type() != frames.TypeOpen {
			t.Fatalf("first: %v", err)
		}
		r.SetMaxLine(frames.MaxLine)
		if f, err := r.Next(); err != nil || f.Type() != frames.TypeAck {
			t.Fatalf("second: %v", err)
		}
	})
	t.Run("a long line is not buffered", func(t *testing.T) {
		src := io.MultiReader(strings.NewReader(strings.Repeat("x", 10<<20)), strings.NewReader("\n"+ack))
		r := frames.NewReader(src, 64<<10)
		if _, err := r.ReadLine(); !errors.Is(err, frames.ErrLineTooLong) || r.Buffered() > 64<<10 {
			t.Fatalf("%v, buffered %d", err, r.Buffered())
		}
		if line, err := r.ReadLine(); err != nil || string(line) != ack {
			t.Fatalf("after skipping: %q %v", line, err)
		}
	})
	t.Run("read error", func(t *testing.T) {
		boom := errors.New("boom")
		r := frames.NewReader(io.MultiReader(strings.NewReader(ack+"{\"ty"), iotest.ErrReader(boom)), 0)
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := r.Next(); err != boom {
				t.Fatalf("got %v, want boom", err)
			}
		}
	})
	t.Run("reader errors are sticky", func(t *testing.T) {
		r := frames.NewReader(iotest.TimeoutReader(strings.NewReader(ack+ack)), 0)
		for range 2 {
			if _, err := r.Next(); err != nil {
				t.Fatal(err)
			}
		}
		for range 2 {
			if _, err := r.Next(); err != iotest.ErrTimeout {
				t.Fatalf("got %v, want the reader's error", err)
			}
		}
	})
	t.Run("decode error is per line", func(t *testing.T) {
		r := frames.NewReader(iotest.OneByteReader(strings.NewReader("{\"type\":\"ack\"}\n"+ack)), 0)
		if _, err := r.Next(); !errors.Is(err, frames.ErrMissingField) {
			t.Fatalf("got %v", err)
		}
		if f, err := r.Next(); err != nil || f.(*frames.Ack).Stdout != 1 {
			t.Fatalf("next line: %v", err)
		}
	})
}
