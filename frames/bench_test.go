package frames_test

import (
	"encoding/json"
	"io"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/procwire/procwire/frames"
)

// jsonStdout is the encoding/json baseline: the same frame through
// reflection.
type jsonStdout struct {
	Type string `json:"type"`
	Off  int64  `json:"off"`
	Data []byte `json:"data"`
}

var benchSizes = []int{4 << 10, 32 << 10, 256 << 10}

func payload(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func sizeName(n int) string { return strconv.Itoa(n>>10) + "KiB" }

// BenchmarkEncodeStdout encodes a stdout frame with Append, and the same
// frame with encoding/json as the baseline.
func BenchmarkEncodeStdout(b *testing.B) {
	for _, n := range benchSizes {
		f := &frames.Stdout{Off: 1 << 40, Data: payload(n)}
		b.Run("frames/"+sizeName(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			buf := frames.Append(nil, f)
			for b.Loop() {
				buf = frames.Append(buf[:0], f)
			}
		})
		b.Run("encoding_json/"+sizeName(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			v := jsonStdout{Type: "stdout", Off: f.Off, Data: f.Data}
			for b.Loop() {
				if _, err := json.Marshal(&v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeStdout decodes a canonical stdout frame (the fast path),
// the same frame with its members reversed (the general path, type last:
// the slowest order), and the canonical frame with encoding/json.
func BenchmarkDecodeStdout(b *testing.B) {
	for _, n := range benchSizes {
		line := frames.Append(nil, &frames.Stdout{Off: 1 << 40, Data: payload(n)})
		b.Run("frames/"+sizeName(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			var d frames.Decoder
			_, _ = d.Decode(line) // grow the payload buffer
			for b.Loop() {
				if _, err := d.Decode(line); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("frames_general/"+sizeName(n), func(b *testing.B) {
			// Not canonical (data first): the strict general path.
			f, _ := frames.Decode(line)
			s := f.(*frames.Stdout)
			general := []byte(`{"data":"` + string(frames.Append(nil, s)[len(`{"type":"stdout","off":1099511627776,"data":"`):len(line)-3]) +
				`","off":1099511627776,"type":"stdout"}`)
			b.SetBytes(int64(n))
			b.ReportAllocs()
			var d frames.Decoder
			_, _ = d.Decode(general)
			for b.Loop() {
				if _, err := d.Decode(general); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("encoding_json/"+sizeName(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			var v jsonStdout
			for b.Loop() {
				v.Data = v.Data[:0]
				if err := json.Unmarshal(line, &v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReaderStdout reads and decodes 32 KiB stdout frames from a
// stream with Reader.Next.
func BenchmarkReaderStdout(b *testing.B) {
	const n = 32 << 10
	line := frames.Append(nil, &frames.Stdout{Off: 0, Data: payload(n)})
	b.SetBytes(n)
	b.ReportAllocs()
	src := &repeatReader{line: line}
	r := frames.NewReader(src, frames.MaxLine)
	for range 4 {
		_, _ = r.Next() // grow the buffers
	}
	for b.Loop() {
		if _, err := r.Next(); err != nil {
			b.Fatal(err)
		}
	}
}

// repeatReader yields line over and over.
type repeatReader struct {
	line []byte
	off  int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], r.line[r.off:])
		n += c
		r.off = (r.off + c) % len(r.line)
	}
	return n, nil
}

var _ io.Reader = (*repeatReader)(nil)
