package frames

import "encoding/binary"

// A base64 codec for the hot path, two characters per table lookup. It is
// exactly the standard padded alphabet with strict trailing bits (the b64
// codec): encode produces the same text, and decode accepts exactly the
// texts b64 accepts without newlines, or reports false so that the caller
// takes the exact path. base64_test.go checks both against encoding/base64.
// On amd64 with AVX2 (base64_amd64.s) whole blocks go through vector loops
// first; the loops here do the rest, the padding and every refusal.

const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

var (
	// enc2[v] is the two characters of the 12-bit value v, big-endian.
	enc2 [1 << 12]uint16
	// dec2[c0<<8|c1] is the 12-bit value of two characters, or invalid.
	dec2 [1 << 16]uint16
	// dec1[c] is the 6-bit value of one character, or 0xff.
	dec1 [256]byte
)

// invalid2 marks an invalid pair in dec2; valid values fit 12 bits.
const invalid2 = 0xffff

func init() {
	for i := range dec1 {
		dec1[i] = 0xff
	}
	for i := range len(alphabet) {
		dec1[alphabet[i]] = byte(i)
	}
	for v := range enc2 {
		enc2[v] = uint16(alphabet[v>>6])<<8 | uint16(alphabet[v&63])
	}
	for i := range dec2 {
		a, b := dec1[i>>8], dec1[i&0xff]
		if a == 0xff || b == 0xff {
			dec2[i] = invalid2
		} else {
			dec2[i] = uint16(a)<<6 | uint16(b)
		}
	}
}

// appendBase64 appends the padded standard base64 of src to dst.
func appendBase64(dst, src []byte) []byte {
	n := (len(src) + 2) / 3 * 4
	if cap(dst)-len(dst) < n {
		grown := make([]byte, len(dst), len(dst)+n+len(dst)/4)
		copy(grown, dst)
		dst = grown
	}
	out := dst[len(dst) : len(dst)+n]
	if useAVX2 && len(src) >= 28 {
		k := encodeAVX2(out, src)
		src, out = src[k:], out[k/3*4:]
	}
	for len(src) >= 6 && len(out) >= 8 {
		_ = src[5]
		v1 := uint32(src[0])<<16 | uint32(src[1])<<8 | uint32(src[2])
		v2 := uint32(src[3])<<16 | uint32(src[4])<<8 | uint32(src[5])
		binary.BigEndian.PutUint64(out, uint64(enc2[v1>>12&0xfff])<<48|uint64(enc2[v1&0xfff])<<32|
			uint64(enc2[v2>>12&0xfff])<<16|uint64(enc2[v2&0xfff]))
		src, out = src[6:], out[8:]
	}
	for len(src) >= 3 && len(out) >= 4 {
		v := uint32(src[0])<<16 | uint32(src[1])<<8 | uint32(src[2])
		binary.BigEndian.PutUint32(out, uint32(enc2[v>>12&0xfff])<<16|uint32(enc2[v&0xfff]))
		src, out = src[3:], out[4:]
	}
	switch {
	case len(src) == 1 && len(out) >= 4:
		v := uint32(src[0]) << 4
		binary.BigEndian.PutUint32(out, uint32(enc2[v&0xfff])<<16|'='<<8|'=')
	case len(src) == 2 && len(out) >= 4:
		v := uint32(src[0])<<10 | uint32(src[1])<<2
		binary.BigEndian.PutUint32(out, uint32(enc2[v>>6&0xfff])<<16|uint32(alphabet[v&63])<<8|'=')
	}
	return dst[:len(dst)+n]
}

// decodeBase64 decodes src, whose length is a non-zero multiple of 4, into
// dst, which has room for len(src)/4*3 bytes. It reports the length decoded
// and whether src is valid strict padded base64.
func decodeBase64(dst, src []byte) (int, bool) {
	if len(src) == 0 || len(src)%4 != 0 || len(dst) < len(src)/4*3 {
		return 0, false
	}
	last := src[len(src)-4:]
	body := src[:len(src)-4]
	o := 0
	if useAVX2 && len(body) >= 32 {
		// Whole blocks up to the first with a character outside the
		// alphabet, which the loops below then refuse.
		k := decodeAVX2(dst, body)
		body = body[k:]
		o = k / 4 * 3
	}
	// Two quanta a step, writing 8 bytes of which 6 count: the last
	// quantum, decoded after the loop, gives the slack.
	for len(body) >= 8 && o+8 <= len(dst) {
		_ = body[7]
		a, b := dec2[uint16(body[0])<<8|uint16(body[1])], dec2[uint16(body[2])<<8|uint16(body[3])]
		c, d := dec2[uint16(body[4])<<8|uint16(body[5])], dec2[uint16(body[6])<<8|uint16(body[7])]
		if (a|b|c|d)&0xf000 != 0 { // invalid2 has these bits
			return 0, false
		}
		binary.BigEndian.PutUint64(dst[o:], uint64(a)<<52|uint64(b)<<40|uint64(c)<<28|uint64(d)<<16)
		body = body[8:]
		o += 6
	}
	for len(body) >= 4 {
		a, b := dec2[uint16(body[0])<<8|uint16(body[1])], dec2[uint16(body[2])<<8|uint16(body[3])]
		if (a|b)&0xf000 != 0 {
			return 0, false
		}
		v := uint32(a)<<12 | uint32(b)
		dst[o], dst[o+1], dst[o+2] = byte(v>>16), byte(v>>8), byte(v)
		body = body[4:]
		o += 3
	}
	a, b := dec1[last[0]], dec1[last[1]]
	if (a|b)&0xc0 != 0 { // 0xff has these bits
		return 0, false
	}
	switch {
	case last[2] == '=' && last[3] == '=':
		if b&0x0f != 0 {
			return 0, false
		}
		dst[o] = a<<2 | b>>4
		return o + 1, true
	case last[3] == '=':
		c := dec1[last[2]]
		if c&0xc0 != 0 || c&0x03 != 0 {
			return 0, false
		}
		dst[o], dst[o+1] = a<<2|b>>4, b<<4|c>>2
		return o + 2, true
	}
	c, d := dec1[last[2]], dec1[last[3]]
	if (c|d)&0xc0 != 0 {
		return 0, false
	}
	dst[o], dst[o+1], dst[o+2] = a<<2|b>>4, b<<4|c>>2, c<<6|d
	return o + 3, true
}
