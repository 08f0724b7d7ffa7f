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
