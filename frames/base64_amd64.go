//go:build !purego

package frames

// hasAVX2 reports whether the CPU and OS support AVX2.
var hasAVX2 = cpuHasAVX2()

// useAVX2 selects the AVX2 bulk loops; tests turn it off to cover the
// pure-Go path.
var useAVX2 = hasAVX2

// encodeAVX2 encodes whole 24-byte blocks of src into dst, 32 characters
// each, while src has 28 bytes left and dst room for 32, and returns the
// number of bytes of src consumed. It requires AVX2.
//
//go:noescape
func encodeAVX2(dst, src []byte) int

// decodeAVX2 decodes whole 32-character blocks of src into dst, 24 bytes
// each, while src has 32 characters left and dst room for 32 bytes, stopping
// before a block with a character outside the alphabet ('=' included). It
// returns the number of characters consumed. It requires AVX2.
//
//go:noescape
func decodeAVX2(dst, src []byte) int

func cpuHasAVX2() bool
