package frames

import (
	"bytes"
	"encoding/base64"
	"math/rand/v2"
	"testing"
)

func checkBase64(t *testing.T, src []byte) {
	t.Helper()
	want := base64.StdEncoding.AppendEncode(nil, src)
	if got := appendBase64([]byte("x"), src); !bytes.Equal(got[1:], want) || got[0] != 'x' {
		t.Fatalf("appendBase64(%x) = %q, want %q", src, got[1:], want)
	}
}

func checkDecodeBase64(t *testing.T, text []byte) {
	t.Helper()
	if len(text) == 0 || len(text)%4 != 0 {
		return
	}
	dst := make([]byte, len(text)/4*3)
	n, ok := decodeBase64(dst, text)
	want, err := base64.StdEncoding.Strict().DecodeString(string(text))
	strictOK := err == nil && !bytes.ContainsAny(text, "\r\n")
	if ok != strictOK || ok && !bytes.Equal(dst[:n], want) {
		t.Fatalf("decodeBase64(%q) = %x, %v; encoding/base64 says %x, %v", text, dst[:n], ok, want, err)
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
	f.Fuzz(func(t *testing.T, b []byte) {
		checkBase64(t, b)
		checkDecodeBase64(t, b)
		checkDecodeBase64(t, base64.StdEncoding.AppendEncode(nil, b))
	})
}

// BenchmarkB64Decode compares the hot-path decoder with encoding/base64.
func BenchmarkB64Decode(b *testing.B) {
	src := make([]byte, 32<<10)
	for i := range src {
		src[i] = byte(i * 7)
	}
	text := base64.StdEncoding.AppendEncode(nil, src)
	dst := make([]byte, len(text))
	b.Run("custom", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			decodeBase64(dst, text)
		}
	})
	b.Run("stdlib", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			b64.Decode(dst, text)
		}
	})
}

// BenchmarkB64Encode compares the hot-path encoder with encoding/base64.
func BenchmarkB64Encode(b *testing.B) {
	src := make([]byte, 32<<10)
	for i := range src {
		src[i] = byte(i * 7)
	}
	dst := make([]byte, 0, 64<<10)
	b.Run("custom", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			appendBase64(dst, src)
		}
	})
	b.Run("stdlib", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			b64.AppendEncode(dst, src)
		}
	})
}
