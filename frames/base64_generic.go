//go:build !amd64 || purego

package frames

// Without AVX2 assembly base64.go's loops do all the work.

const hasAVX2 = false

var useAVX2 = false

func encodeAVX2(dst, src []byte) int { panic("frames: no AVX2 base64") }

func decodeAVX2(dst, src []byte) int { panic("frames: no AVX2 base64") }
