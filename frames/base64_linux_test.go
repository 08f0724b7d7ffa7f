package frames

import (
	"bytes"
	"encoding/base64"
	"math/rand/v2"
	"syscall"
	"testing"
)

// guarded maps n bytes of memory with inaccessible pages on both sides, so
// that touching a byte before or after it faults.
func guarded(t *testing.T, n int) []byte {
	t.Helper()
	page := syscall.Getpagesize()
	size := (n + page - 1) / page * page
	mem, err := syscall.Mmap(-1, 0, size+2*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Skip("mmap:", err)
	}
	t.Cleanup(func() { _ = syscall.Munmap(mem) })
	if err := syscall.Mprotect(mem[:page], syscall.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mprotect(mem[page+size:], syscall.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	return mem[page : page+size : page+size]
}

// TestBase64PageEdges puts sources and destinations flush against
// inaccessible pages, at the start and at the end, on every path: a read or
// write outside the slices faults.
func TestBase64PageEdges(t *testing.T) {
	const most = 600
	srcMem := guarded(t, 2*most)
	dstMem := guarded(t, 2*most)
	r := rand.New(rand.NewPCG(9, 10))
	for n := range most {
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		want := base64.StdEncoding.AppendEncode(nil, data)
		size := len(want) / 4 * 3
		for _, avx := range paths() {
			onPath(avx, func() {
				for _, atEnd := range []bool{false, true} {
					place := func(mem []byte, k int) []byte {
						if atEnd {
							return mem[len(mem)-k : len(mem) : len(mem)]
						}
						return mem[:k:k]
					}
					src := place(srcMem, n)
					copy(src, data)
					dst := place(dstMem, len(want))
					if got := appendBase64(dst[:0], src); !bytes.Equal(got, want) {
						t.Fatalf("avx2=%v n=%d atEnd=%v: appendBase64 = %q, want %q", avx, n, atEnd, got, want)
					}
					if n == 0 {
						continue
					}
					text := place(srcMem, len(want))
					copy(text, want)
					out := place(dstMem, size)
					if m, ok := decodeBase64(out, text); !ok || !bytes.Equal(out[:m], data) {
						t.Fatalf("avx2=%v n=%d atEnd=%v: decodeBase64 = %x, %v; want %x", avx, n, atEnd, out[:m], ok, data)
					}
					// A bad last block, found only at the end.
					text[max(0, len(text)-5)] = '*'
					if _, ok := decodeBase64(out, text); ok {
						t.Fatalf("avx2=%v n=%d atEnd=%v: decodeBase64 took %q", avx, n, atEnd, text)
					}
				}
			})
		}
	}
}
