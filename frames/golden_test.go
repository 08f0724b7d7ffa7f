package frames_test

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/procwire/procwire/frames"
)

// The golden vectors are what an implementation in another language tests
// against. The tables below are their source: go test ./frames -update
// rewrites testdata/golden from them, and without -update the test checks
// that the files are exactly what the tables say.
var update = flag.Bool("update", false, "rewrite testdata/golden from the tables in golden_test.go")

const goldenDir = "testdata/golden"

// invalidVector is one line of invalid.ndjson.
type invalidVector struct {
	ID string `json:"id"`
	// Line is the raw text given to the decoder, '\n' included only where
	// the vector is about it. LineBase64 replaces it for bytes that are not
	// valid UTF-8.
	Line       string `json:"line,omitempty"`
	LineBase64 string `json:"line_base64,omitempty"`
	// MaxLine, when set, is the line limit to decode with (else MaxLine).
	MaxLine int         `json:"max_line,omitempty"`
	Error   vectorError `json:"error"`
}

type vectorError struct {
	Frame string `json:"frame"`
	Field string `json:"field"`
	Kind  string `json:"kind"`
}

// noncanonicalVector is one line of noncanonical.ndjson: a valid frame not
// in canonical form, and the canonical line it re-encodes to.
type noncanonicalVector struct {
	ID        string `json:"id"`
	Line      string `json:"line"`
	Canonical string `json:"canonical"`
}

func (v invalidVector) raw() []byte {
	if v.LineBase64 != "" {
		b, err := base64.StdEncoding.DecodeString(v.LineBase64)
		if err != nil {
			panic(err)
		}
		return b
	}
	return []byte(v.Line)
}

func readNDJSON[T any](t *testing.T, name string) []T {
	t.Helper()
	f, err := os.Open(filepath.Join(goldenDir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var v T
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func readLines(t *testing.T, name string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(goldenDir, name))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	return lines
}

func marshalNDJSON[T any](vs []T) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for _, v := range vs {
		if err := enc.Encode(v); err != nil {
			panic(err)
		}
	}
	return buf.Bytes()
}

// checkGoldenFile rewrites the file with -update, and otherwise checks that
// it holds exactly want.
func checkGoldenFile(t *testing.T, name string, want []byte) {
	t.Helper()
	path := filepath.Join(goldenDir, name)
	if *update {
		if err := os.MkdirAll(goldenDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the tables in golden_test.go; run go test ./frames -update and review the diff", path)
	}
}

func TestGoldenFiles(t *testing.T) {
	var valid []byte
	for _, l := range validLines() {
		if strings.Contains(l, "\n") {
			t.Fatalf("valid line with a newline: %q", l)
		}
		valid = append(valid, l...)
		valid = append(valid, '\n')
	}
	checkGoldenFile(t, "valid.ndjson", valid)
	checkGoldenFile(t, "invalid.ndjson", marshalNDJSON(invalidVectors()))
	checkGoldenFile(t, "noncanonical.ndjson", marshalNDJSON(noncanonicalVectors()))
}

func TestGoldenValid(t *testing.T) {
	types := map[frames.Type]bool{}
	var d frames.Decoder
	d.MaxLine = frames.MaxFirstLine
	for i, line := range readLines(t, "valid.ndjson") {
		f, err := d.Decode(line)
		if err != nil {
			t.Fatalf("valid line %d: %v (%.100q)", i+1, err, line)
		}
		types[f.Type()] = true
		if err := frames.Validate(f); err != nil {
			t.Fatalf("valid line %d: Validate: %v", i+1, err)
		}
		if got := frames.Append(nil, f); !bytes.Equal(got, line) {
			t.Fatalf("valid line %d re-encodes as\n%.200q, want\n%.200q", i+1, got, line)
		}
		// The general path must agree with the data fast path.
		general, err := (&frames.Decoder{MaxLine: frames.MaxFirstLine + 1}).Decode(bytes.Replace(line, []byte(`{"type"`), []byte(`{ "type"`), 1))
		if err != nil || !frames.Equal(general, f) {
			t.Fatalf("valid line %d through the general path: %v", i+1, err)
		}
	}
	for ty := frames.TypeOpen; ty <= frames.TypePong; ty++ {
		if !types[ty] {
			t.Errorf("no valid vector of type %s", ty)
		}
	}
}

func TestGoldenNoncanonical(t *testing.T) {
	for _, v := range readNDJSON[noncanonicalVector](t, "noncanonical.ndjson") {
		f, err := frames.Decode([]byte(v.Line))
		if err != nil {
			t.Fatalf("%s: %v", v.ID, err)
		}
		if got := string(frames.Append(nil, f)); got != v.Canonical+"\n" {
			t.Fatalf("%s: re-encodes as %q, want %q", v.ID, got, v.Canonical)
		}
		if v.Line == v.Canonical {
			t.Fatalf("%s: already canonical", v.ID)
		}
	}
}

func TestGoldenInvalid(t *testing.T) {
	kinds := map[string]bool{}
	ids := map[string]bool{}
	for _, v := range readNDJSON[invalidVector](t, "invalid.ndjson") {
		if ids[v.ID] {
			t.Fatalf("duplicate vector id %s", v.ID)
		}
		ids[v.ID] = true
		kinds[v.Error.Kind] = true
		d := frames.Decoder{MaxLine: v.MaxLine}
		if v.MaxLine == 0 {
			d.MaxLine = frames.MaxFirstLine
		}
		_, err := d.Decode(v.raw())
		var de *frames.DecodeError
		if !errors.As(err, &de) {
			t.Errorf("%s: got %v, want a *DecodeError", v.ID, err)
			continue
		}
		got := vectorError{Frame: de.Frame, Field: de.Field, Kind: string(de.Kind)}
		if got != v.Error {
			t.Errorf("%s: got %+v (%v), want %+v", v.ID, got, err, v.Error)
		}
		if !errors.Is(err, &frames.DecodeError{Kind: frames.Kind(v.Error.Kind)}) {
			t.Errorf("%s: errors.Is fails for its own kind", v.ID)
		}
		if n := len(err.Error()); n > 123 {
			t.Errorf("%s: Error() is %d bytes", v.ID, n)
		}
	}
	for _, k := range frames.Kinds() {
		if !kinds[string(k)] {
			t.Errorf("no invalid vector of kind %s", k)
		}
	}
}
