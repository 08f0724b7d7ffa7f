package fuzz

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"

	"github.com/procwire/procwire/frames"
)

const golden = "../frames/testdata/golden"

// maxSeed keeps the fuzzer's seeds small; the big golden vectors are for
// the decoder's tests.
const maxSeed = 8 << 10

// goldenSeeds returns the raw lines of the golden vectors: valid,
// non-canonical and invalid.
func goldenSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	var seeds [][]byte
	add := func(b []byte) {
		if len(b) <= maxSeed {
			seeds = append(seeds, b)
		}
	}
	each := func(name string, fn func([]byte)) {
		f, err := os.Open(filepath.Join(golden, name))
		if err != nil {
			tb.Fatal(err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			fn(sc.Bytes())
		}
		if err := sc.Err(); err != nil {
			tb.Fatal(err)
		}
	}
	each("valid.ndjson", func(b []byte) { add(append(bytes.Clone(b), '\n')) })
	each("noncanonical.ndjson", func(b []byte) {
		var v struct{ Line string }
		if err := json.Unmarshal(b, &v); err != nil {
			tb.Fatal(err)
		}
		add([]byte(v.Line))
	})
	each("invalid.ndjson", func(b []byte) {
		var v struct {
			Line       string
			LineBase64 string `json:"line_base64"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			tb.Fatal(err)
		}
		raw := []byte(v.Line)
		if v.LineBase64 != "" {
			var err error
			if raw, err = base64.StdEncoding.DecodeString(v.LineBase64); err != nil {
				tb.Fatal(err)
			}
		}
		add(raw)
	})
	return seeds
}

// reused is a long-lived Decoder, so state left over from one input would
// show up in the next.
var reused = frames.Decoder{MaxLine: frames.MaxFirstLine}

// FuzzDecode: the decoder never panics; a refusal is a well-formed
// *DecodeError; whatever decodes is valid, re-encodes canonically to bytes
// that decode to an equal frame and re-encode identically; a reused Decoder
// and the allocating Decode agree.
func FuzzDecode(f *testing.F) {
	for _, s := range goldenSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		d := frames.Decoder{MaxLine: frames.MaxFirstLine}
		got, err := d.Decode(line)
		fresh, ferr := frames.Decode(line)
		if len(line) < frames.MaxLine && !sameResult(got, err, fresh, ferr) {
			t.Fatalf("Decoder.Decode and Decode disagree: %v / %v", err, ferr)
		}
		again, aerr := reused.Decode(line)
		if !sameResult(got, err, again, aerr) {
			t.Fatalf("a reused Decoder disagrees: %v / %v", err, aerr)
		}
		if err != nil {
			checkDecodeError(t, err)
			return
		}
		if verr := frames.Validate(got); verr != nil {
			t.Fatalf("decoded %+v but Validate says %v", got, verr)
		}
		canon := frames.Append(nil, got)
		back, err := d.Decode(canon)
		if err != nil {
			t.Fatalf("canonical %q does not decode: %v", canon, err)
		}
		if !frames.Equal(back, fresh) {
			t.Fatalf("canonical %q decodes to %+v, want %+v", canon, back, fresh)
		}
		if twice := frames.Append(nil, back); !bytes.Equal(twice, canon) {
			t.Fatalf("not a fixed point: %q then %q", canon, twice)
		}
	})
}

// FuzzDataPaths: a data frame decodes the same through the canonical fast
// path and the general path. A space after the '{' changes nothing to the
// frame but keeps the fast path from recognising it.
func FuzzDataPaths(f *testing.F) {
	for _, s := range goldenSeeds(f) {
		f.Add(s)
	}
	f.Add([]byte(`{"type":"stdout","off":0,"data":"aGVsbG8K"}`))
	f.Add([]byte(`{"type":"stdin","off":00,"data":"aGVsbG8K"}`))
	f.Add([]byte(`{"type":"stderr","off":9223372036854775808,"data":"AA=="}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		if !bytes.HasPrefix(line, []byte(`{"type":"`)) {
			line = append([]byte(`{"type":"stdout","off":`), line...)
		}
		spaced := append([]byte("{ "), line[1:]...)
		var fast, general frames.Decoder
		fast.MaxLine, general.MaxLine = frames.MaxFirstLine, frames.MaxFirstLine+1
		a, aerr := fast.Decode(line)
		b, berr := general.Decode(spaced)
		if !sameResult(a, aerr, b, berr) {
			t.Fatalf("fast and general paths disagree on %q: %v / %v (%+v / %+v)", line, aerr, berr, a, b)
		}
		// Decoding into a caller's buffer (Decoder.Into, as the client's
		// stdout queue takes it) changes nothing to the result either, and
		// never writes past the n bytes it asked for.
		var into frames.Decoder
		into.MaxLine = frames.MaxFirstLine
		var given []byte
		into.Into = func(_ frames.Type, n int) []byte {
			given = make([]byte, n, n+8)
			copy(given[n:cap(given)], "guarding")
			return given
		}
		c, cerr := into.Decode(line)
		if !sameResult(a, aerr, c, cerr) {
			t.Fatalf("decoding into a given buffer disagrees on %q: %v / %v (%+v / %+v)", line, aerr, cerr, a, c)
		}
		if given != nil && string(given[len(given):cap(given)]) != "guarding" {
			t.Fatalf("decoding %q wrote past the %d bytes it asked for", line, len(given))
		}
	})
}

func sameResult(a frames.Frame, aerr error, b frames.Frame, berr error) bool {
	if aerr != nil || berr != nil {
		var x, y *frames.DecodeError
		if !errors.As(aerr, &x) || !errors.As(berr, &y) {
			return false
		}
		return x.Frame == y.Frame && x.Field == y.Field && x.Kind == y.Kind
	}
	return frames.Equal(a, b)
}

func checkDecodeError(t *testing.T, err error) {
	t.Helper()
	var de *frames.DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("not a *DecodeError: %T %v", err, err)
	}
	known := false
	for _, k := range frames.Kinds() {
		known = known || k == de.Kind
	}
	if !known {
		t.Fatalf("unknown kind %q", de.Kind)
	}
	if !errors.Is(err, &frames.DecodeError{Kind: de.Kind}) {
		t.Fatalf("errors.Is fails for %v", err)
	}
	if s := err.Error(); len(s) > 123 || !utf8.ValidString(s) {
		t.Fatalf("Error() not a close reason: %q", s)
	}
	if de.Frame != "" {
		if _, ok := frames.ParseType(de.Frame); !ok {
			t.Fatalf("frame %q is not a type", de.Frame)
		}
	}
}

// chunkReader returns src in chunks whose sizes cycle through sizes (0
// included: a read of nothing), then ends with end.
type chunkReader struct {
	src   []byte
	sizes []byte
	n     int
	end   error
	empty int // empty reads in a row
	read  int // bytes handed out so far
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.src) == 0 {
		return 0, c.end
	}
	size := 1
	if len(c.sizes) > 0 {
		size = int(c.sizes[c.n%len(c.sizes)])
		c.n++
	}
	if size == 0 {
		// An empty read is allowed now and then, not forever.
		if c.empty++; c.empty > 2 {
			size, c.empty = 1, 0
		}
	} else {
		c.empty = 0
	}
	size = min(size, len(p), len(c.src))
	copy(p, c.src[:size])
	c.src = c.src[size:]
	c.read += size
	return size, nil
}

var errInjected = errors.New("injected read error")

// step is one result of ReadLine: a line or an error.
type step struct {
	line []byte
	err  error
}

// naiveLines is the model of Reader.ReadLine: the same bytes split at each
// '\n' by the simplest code that follows the documented rules.
func naiveLines(data []byte, limit int, end error) (steps []step) {
	pos := 0
	for {
		rest := data[pos:]
		j := bytes.IndexByte(rest, '\n')
		switch {
		case j >= 0 && j+1 <= limit:
			pos += j + 1
			steps = append(steps, step{line: rest[:j+1]})
		case j >= 0 || len(rest) >= limit:
			steps = append(steps, step{err: frames.ErrLineTooLong})
			if j >= 0 {
				pos += j + 1
			} else {
				pos = len(data)
			}
		case len(rest) == 0:
			return append(steps, step{err: end}, step{err: end})
		case end == io.EOF:
			return append(steps, step{err: io.ErrUnexpectedEOF}, step{err: io.EOF})
		default:
			return append(steps, step{err: end}, step{err: end})
		}
	}
}

// FuzzReader: the NDJSON line reader, fed the input in chunks whose sizes
// come from the input's first bytes, returns exactly the lines and errors
// of a naive split, and never holds more than its limit in memory.
func FuzzReader(f *testing.F) {
	for _, s := range goldenSeeds(f) {
		f.Add(uint16(64), []byte{3, 0, 7}, false, s)
	}
	f.Add(uint16(8), []byte{1}, true, []byte("ab\ncdefghijkl\nmn\nopqrstuvwxyz"))
	f.Add(uint16(0), []byte{}, false, []byte("\n\n\n"))
	f.Fuzz(func(t *testing.T, limit16 uint16, sizes []byte, fail bool, data []byte) {
		limit := int(limit16%4096) + 1
		end := io.EOF
		if fail {
			end = errInjected
		}
		want := naiveLines(data, limit, end)
		src := &chunkReader{src: data, sizes: sizes, end: end}
		r := frames.NewReader(src, limit)
		consumed := 0
		for i, w := range want {
			line, err := r.ReadLine()
			switch {
			case w.err == nil && (err != nil || !bytes.Equal(line, w.line)):
				t.Fatalf("step %d: got %q, %v; want line %q", i, line, err, w.line)
			case w.err != nil && !errors.Is(err, w.err):
				t.Fatalf("step %d: got %q, %v; want error %v", i, line, err, w.err)
			}
			if w.err == nil {
				consumed += len(line)
			}
			// Memory is bounded by the limit, and no byte is returned
			// before it was read.
			if held := r.Buffered(); held > max(limit, 4096) || src.read-held < consumed {
				t.Fatalf("step %d: holds %d bytes with limit %d (read %d, returned %d)", i, held, limit, src.read, consumed)
			}
		}
	})
}

// frameFrom builds a frame of one of the types from arbitrary values, most
// of them invalid.
func frameFrom(kind uint8, a, b int64, s1, s2, s3 string, data []byte) frames.Frame {
	parts := bytes.Split([]byte(s3), []byte{','})
	part := func(i int) string {
		if i < len(parts) {
			return string(parts[i])
		}
		return s1
	}
	env := map[string]string{}
	for i := 0; i+1 < len(parts); i += 2 {
		env[string(parts[i])] = string(parts[i+1])
	}
	var args []string
	for _, p := range parts {
		args = append(args, string(p))
	}
	ev := frames.Evidence{WireRevision: part(0), Provider: part(1), ProviderRevision: part(2),
		InstanceID: part(3), ProcessID: part(4), Executable: part(5), WorkingDirectory: part(6),
		ArgumentsDigest: part(7), StartedAt: part(8)}
	if b%5 == 2 {
		ev.Limits = &frames.Limits{Pids: b}
	}
	var gap *frames.Gap
	if b%3 == 0 {
		gap = &frames.Gap{Requested: a, Oldest: b}
	}
	var tty *frames.TTY
	if a%3 == 0 {
		tty = &frames.TTY{Rows: int(a % 70000), Cols: int(b % 70000), Term: part(2), XPixel: int(b % 3), YPixel: int(a % 5)}
	}
	var limits *frames.Limits
	if b%4 == 1 {
		limits = &frames.Limits{Pids: a, Memory: b, CPUMillicores: a ^ b}
	}
	switch frames.Type(kind%20 + 1) {
	case frames.TypeOpen:
		return &frames.Open{InstanceID: s1, Request: frames.ProcessRequest{Executable: s2, Arguments: args,
			WorkingDirectory: part(0), Environment: env}, StdoutWindow: a, StdinWindow: b, OpenKey: part(9), Pings: b%2 == 0,
			ExitReasons: part(10), Limits: limits, TTY: tty}
	case frames.TypeResume:
		return &frames.Resume{ProcessID: s1, Token: s2, StdoutReceived: a, StderrReceived: b, Pings: a%2 == 0}
	case frames.TypeStdin:
		return &frames.Stdin{Off: a, Data: data}
	case frames.TypeStdinClose:
		return &frames.StdinClose{Off: a}
	case frames.TypeAck:
		return &frames.Ack{Stdout: a}
	case frames.TypeSignal:
		return &frames.Signal{ID: a, Signal: frames.SignalName(s1)}
	case frames.TypeDestroy:
		// b picks which of the four fields are set: either pair, mixed
		// pairs and halves of them.
		d := &frames.Destroy{}
		for i, p := range []*string{&d.ProcessID, &d.Token, &d.InstanceID, &d.OpenKey} {
			if b&(1<<i) != 0 {
				*p = [...]string{s1, s2, part(0), part(1)}[i]
			}
		}
		return d
	case frames.TypeOpened:
		return &frames.Opened{ProcessID: s1, Token: s2, Evidence: ev, StdinLimit: a, StdoutWindow: b,
			StderrWindow: a ^ b, GraceMS: a, HeartbeatMS: b, ExitWaitMS: a, MaxData: b, Pings: a%2 == 0, TTY: tty != nil}
	case frames.TypeResumed:
		return &frames.Resumed{ProcessID: s1, Evidence: ev, StdinReceived: a, StdinLimit: b, Pings: b%2 == 0, TTY: tty != nil}
	case frames.TypeCredit:
		return &frames.Credit{StdinReceived: a, StdinLimit: b}
	case frames.TypeStdout:
		return &frames.Stdout{Off: a, Data: data}
	case frames.TypeStdoutEOF:
		return &frames.StdoutEOF{Off: a}
	case frames.TypeStderr:
		return &frames.Stderr{Off: a, Data: data}
	case frames.TypeExit:
		return &frames.Exit{Code: int(a), Signal: s1, Reason: part(1)}
	case frames.TypeSignaled:
		return &frames.Signaled{ID: a, Result: s1}
	case frames.TypeDestroyed:
		return &frames.Destroyed{ProcessID: s1}
	case frames.TypePing:
		return &frames.Ping{ID: a}
	case frames.TypePong:
		return &frames.Pong{ID: b}
	case frames.TypeResize:
		return &frames.Resize{Rows: int(a), Cols: int(b), XPixel: int(a % 7), YPixel: int(b % 11)}
	default:
		return &frames.Error{Code: frames.ErrorCode(s1), Operation: part(0), Expected: part(1), Actual: part(2),
			Requirement: part(3), Reason: part(4), Message: s2, Gap: gap, ID: b}
	}
}

// FuzzValidate: for a frame built in Go, valid or not, Validate gives the
// error that decoding its encoding gives, and a valid frame survives the
// round trip.
func FuzzValidate(f *testing.F) {
	const pid, tok = "8f3a0c1e5b7d49a2b6c4e0f1a2b3c4d5", "3b0e8c1d2f4a6b8c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c"
	ev := "procwire.v1,procwire,0.1,inst-1," + pid + ",cat,/tmp,sha256:" + tok + ",2026-11-29T09:30:00.000Z"
	for k := range uint8(17) {
		f.Add(k, int64(1024), int64(4096), "inst-1", "cat", "/tmp,-u,PATH,/bin", []byte("hi"))
		f.Add(k, int64(1), int64(3), pid, tok, ev, []byte{0})
		f.Add(k, int64(-1), int64(0), "SandboxOperationFailed", "\xff", "a,b,c,d,e", []byte{})
	}
	f.Add(uint8(13), int64(0), int64(0), "SIGRTMIN+7", "", "", []byte(nil))
	for b := range int64(16) { // destroy with every subset of its fields
		f.Add(uint8(6), int64(0), b, pid, tok, "inst-1,"+tok, []byte(nil))
	}
	f.Fuzz(func(t *testing.T, kind uint8, a, b int64, s1, s2, s3 string, data []byte) {
		fr := frameFrom(kind, a, b, s1, s2, s3, data)
		verr := frames.Validate(fr)
		d := frames.Decoder{MaxLine: frames.MaxFirstLine}
		got, derr := d.Decode(frames.Append(nil, fr))
		if (verr == nil) != (derr == nil) {
			t.Fatalf("%+v: Validate says %v, Decode %v", fr, verr, derr)
		}
		if verr != nil {
			var v, w *frames.DecodeError
			if !errors.As(verr, &v) || !errors.As(derr, &w) || v.Frame != w.Frame || v.Field != w.Field || v.Kind != w.Kind {
				t.Fatalf("%+v: Validate says %v, Decode %v", fr, verr, derr)
			}
			return
		}
		if !frames.Equal(got, fr) {
			t.Fatalf("round trip of %+v gives %+v", fr, got)
		}
	})
}
