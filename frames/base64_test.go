package frames

import (
	"bytes"
	"encoding/base64"
	"math/rand/v2"
	"strings"
	"testing"
)

// paths are the settings of useAVX2 that this machine can run: the pure-Go
// loops always, the AVX2 ones where the CPU has them.
func paths() []bool {
	if hasAVX2 {
		return []bool{false, true}
	}
	return []bool{false}
}

// onPath runs f with useAVX2 set to avx, then restores it.
func onPath(avx bool, f func()) {
	defer func(old bool) { useAVX2 = old }(useAVX2)
	useAVX2 = avx
	f()
}

// checkBase64 checks appendBase64 on every path.
func checkBase64(t *testing.T, src []byte) {
	t.Helper()
	want := base64.StdEncoding.AppendEncode(nil, src)
	for _, avx := range paths() {
		onPath(avx, func() {
			if got := appendBase64([]byte("x"), src); !bytes.Equal(got[1:], want) || got[0] != 'x' {
				t.Fatalf("avx2=%v: appendBase64(%x) = %q, want %q", avx, src, got[1:], want)
			}
		})
	}
}

// checkDecodeBase64 checks decodeBase64 on every path.
func checkDecodeBase64(t *testing.T, text []byte) {
	t.Helper()
	if len(text) == 0 || len(text)%4 != 0 {
		return
	}
	want, err := base64.StdEncoding.Strict().DecodeString(string(text))
	strictOK := err == nil && !bytes.ContainsAny(text, "\r\n")
	for _, avx := range paths() {
		onPath(avx, func() {
			dst := make([]byte, len(text)/4*3)
			n, ok := decodeBase64(dst, text)
			if ok != strictOK || ok && !bytes.Equal(dst[:n], want) {
				t.Fatalf("avx2=%v: decodeBase64(%q) = %x, %v; encoding/base64 says %x, %v", avx, text, dst[:n], ok, want, err)
			}
		})
	}
}

// TestBase64Lengths checks both directions for every length up to 2048 on
// every path, with the slices at random offsets and capacities exactly as
// long as needed, and guard bytes around them that must stay untouched.
func TestBase64Lengths(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const guard = 64
	for n := range 2049 {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		want := base64.StdEncoding.AppendEncode(nil, data)
		for _, avx := range paths() {
			onPath(avx, func() {
				// Encode: src and dst at odd offsets inside larger buffers.
				sbuf := make([]byte, guard+n+guard)
				so := r.IntN(guard)
				src := sbuf[so : so+n : so+n]
				copy(src, data)
				dbuf := make([]byte, guard+3+len(want)+guard)
				for i := range dbuf {
					dbuf[i] = 0xa5
				}
				do := r.IntN(guard)
				dst := dbuf[do : do+3 : do+3+len(want)]
				copy(dst, "abc")
				got := appendBase64(dst, src)
				if &got[0] != &dst[0] || string(got[:3]) != "abc" || !bytes.Equal(got[3:], want) {
					t.Fatalf("avx2=%v n=%d: appendBase64 = %q, want %q", avx, n, got, want)
				}
				checkGuard(t, dbuf, do, do+3+len(want), 0xa5)
				if !bytes.Equal(src, data) {
					t.Fatalf("avx2=%v n=%d: appendBase64 changed its source", avx, n)
				}
				if n == 0 {
					return
				}
				// Decode.
				tbuf := make([]byte, guard+len(want)+guard)
				to := r.IntN(guard)
				text := tbuf[to : to+len(want) : to+len(want)]
				copy(text, want)
				size := len(want) / 4 * 3
				obuf := make([]byte, guard+size+guard)
				for i := range obuf {
					obuf[i] = 0x5a
				}
				oo := r.IntN(guard)
				out := obuf[oo : oo+size : oo+size]
				m, ok := decodeBase64(out, text)
				if !ok || !bytes.Equal(out[:m], data) {
					t.Fatalf("avx2=%v n=%d: decodeBase64 = %x, %v; want %x", avx, n, out[:m], ok, data)
				}
				checkGuard(t, obuf, oo, oo+size, 0x5a)
				if !bytes.Equal(text, want) {
					t.Fatalf("avx2=%v n=%d: decodeBase64 changed its source", avx, n)
				}
			})
		}
	}
}

// checkGuard checks that buf outside [lo, hi) still holds only b.
func checkGuard(t *testing.T, buf []byte, lo, hi int, b byte) {
	t.Helper()
	for i, c := range buf {
		if (i < lo || i >= hi) && c != b {
			t.Fatalf("byte %d outside [%d, %d) written: %#x", i, lo, hi, c)
		}
	}
}

// TestBase64Corruption sets every position of 96-character texts (no
// padding, "=" and "==") to every byte value: decodeBase64 must refuse
// exactly what encoding/base64 refuses, and otherwise agree, on every path.
func TestBase64Corruption(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{72, 71, 70} {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		text := base64.StdEncoding.AppendEncode(nil, data)
		if len(text) != 96 {
			t.Fatalf("len %d", len(text))
		}
		for pos := range text {
			for c := range 256 {
				bad := bytes.Clone(text)
				bad[pos] = byte(c)
				checkDecodeBase64(t, bad)
			}
		}
	}
}

// TestBase64Alphabet decodes every byte value at every position of a block
// that the vector loop takes whole, next to valid characters of every class.
func TestBase64Alphabet(t *testing.T) {
	text := []byte(strings.Repeat(alphabet, 3))
	for pos := range 128 {
		for c := range 256 {
			bad := bytes.Clone(text)
			bad[pos] = byte(c)
			checkDecodeBase64(t, bad)
		}
	}
}

// TestBase64AVX2Bounds checks the assembly's own contract: the blocks it
// takes for given lengths, and where it stops before a bad character.
func TestBase64AVX2Bounds(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2")
	}
	src := make([]byte, 200)
	dst := make([]byte, 400)
	for n := range len(src) + 1 {
		for m := range 40 {
			want := 0
			for want+28 <= n && want/3*4+32 <= m {
				want += 24
			}
			if got := encodeAVX2(dst[:m], src[:n]); got != want {
				t.Fatalf("encodeAVX2(dst[:%d], src[:%d]) = %d, want %d", m, n, got, want)
			}
		}
	}
	text := bytes.Repeat([]byte("QUJD"), 64)
	for n := range len(text) + 1 {
		for m := range 60 {
			want := 0
			for want+32 <= n && want/4*3+32 <= m {
				want += 32
			}
			if got := decodeAVX2(dst[:m], text[:n]); got != want {
				t.Fatalf("decodeAVX2(dst[:%d], text[:%d]) = %d, want %d", m, n, got, want)
			}
		}
	}
	for pos := range text {
		for _, c := range []byte("=\x00\n@[`{\x80\xff-.:") {
			bad := bytes.Clone(text)
			bad[pos] = c
			if got, want := decodeAVX2(dst, bad), pos/32*32; got != want {
				t.Fatalf("decodeAVX2 with %q at %d = %d, want %d", c, pos, got, want)
			}
		}
	}
}

func TestBase64AgainstStdlib(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for n := range 200 {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(r.Uint32())
		}
		checkBase64(t, src)
		text := base64.StdEncoding.AppendEncode(nil, src)
		checkDecodeBase64(t, text)
		for range 20 { // one byte changed
			if len(text) == 0 {
				break
			}
			bad := bytes.Clone(text)
			bad[r.IntN(len(bad))] = byte(r.Uint32())
			checkDecodeBase64(t, bad)
		}
	}
	for _, s := range []string{"AA==", "AB==", "AAA=", "AAB=", "AAAA", "A===", "====", "AA=A", "AA\nA", "AAAA\r\r\r\r", "AAAAAA==", "AA==AAAA"} {
		checkDecodeBase64(t, []byte(s))
	}
}

// FuzzBase64 checks the hot-path codec against encoding/base64.
func FuzzBase64(f *testing.F) {
	f.Add([]byte("aGVsbG8K"))
	f.Add([]byte("AA==AA=="))
	f.Add([]byte(strings.Repeat(alphabet, 2) + "QQ==")) // vector blocks
	f.Fuzz(func(t *testing.T, b []byte) {
		checkBase64(t, b)
		checkDecodeBase64(t, b)
		checkDecodeBase64(t, base64.StdEncoding.AppendEncode(nil, b))
	})
}

// BenchmarkB64Decode compares the hot-path decoder, pure Go (custom) and
// with AVX2, with encoding/base64.
func BenchmarkB64Decode(b *testing.B) {
	src := make([]byte, 32<<10)
	for i := range src {
		src[i] = byte(i * 7)
	}
	text := base64.StdEncoding.AppendEncode(nil, src)
	dst := make([]byte, len(text))
	b.Run("custom", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		onPath(false, func() {
			for b.Loop() {
				decodeBase64(dst, text)
			}
		})
	})
	b.Run("avx2", func(b *testing.B) {
		if !hasAVX2 {
			b.Skip("no AVX2")
		}
		b.SetBytes(int64(len(src)))
		onPath(true, func() {
			for b.Loop() {
				decodeBase64(dst, text)
			}
		})
	})
	b.Run("stdlib", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			b64.Decode(dst, text)
		}
	})
}

// BenchmarkB64Encode compares the hot-path encoder, pure Go (custom) and
// with AVX2, with encoding/base64.
func BenchmarkB64Encode(b *testing.B) {
	src := make([]byte, 32<<10)
	for i := range src {
		src[i] = byte(i * 7)
	}
	dst := make([]byte, 0, 64<<10)
	b.Run("custom", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		onPath(false, func() {
			for b.Loop() {
				appendBase64(dst, src)
			}
		})
	})
	b.Run("avx2", func(b *testing.B) {
		if !hasAVX2 {
			b.Skip("no AVX2")
		}
		b.SetBytes(int64(len(src)))
		onPath(true, func() {
			for b.Loop() {
				appendBase64(dst, src)
			}
		})
	})
	b.Run("stdlib", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			b64.AppendEncode(dst, src)
		}
	})
}
