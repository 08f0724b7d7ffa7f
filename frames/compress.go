package frames

import (
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/s2"
)

// Payload compression (PROTOCOL.md §5, "Compression"): a data frame's
// payload may travel as one S2 block, marked "enc":"s2". Offsets, windows,
// credit and max_data count the raw bytes; only the base64 text shrinks.

// Bounds of an encoding list (open.output_enc, open.stdin_enc).
const (
	maxEncNames    = 8
	maxEncNameSize = 16
)

// MinCompress is the smallest payload Append tries to compress: below it
// the saving is a few bytes and the frame is latency-bound anyway.
const MinCompress = 64

// validEncList reports whether s is 1..8 comma-separated names of 1..16
// bytes of [a-z0-9].
func validEncList[T ~string | ~[]byte](s T) bool {
	names, size := 1, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == ',':
			if size == 0 {
				return false
			}
			names, size = names+1, 0
		case 'a' <= c && c <= 'z' || '0' <= c && c <= '9':
			size++
		default:
			return false
		}
		if names > maxEncNames || size > maxEncNameSize {
			return false
		}
	}
	return size > 0
}

// EncListHas reports whether the encoding list list (the form of
// Open.OutputEnc) names enc. Names it does not know are ignored, so a
// client may list encodings of later revisions.
func EncListHas(list, enc string) bool {
	for name := range strings.SplitSeq(list, ",") {
		if name == enc {
			return true
		}
	}
	return false
}

// deflateBufs holds scratch buffers for compressed payloads.
var deflateBufs = sync.Pool{New: func() any {
	b := make([]byte, s2.MaxEncodedLen(MaxData))
	return &b
}}

// deflate returns the S2 block of data in a pooled buffer (to be put back
// with releaseDeflate), or nil when compression does not shrink data by at
// least an eighth, or data is shorter than MinCompress.
func deflate(data []byte) *[]byte {
	if len(data) < MinCompress || len(data) > MaxData {
		return nil
	}
	bp := deflateBufs.Get().(*[]byte)
	c := s2.Encode((*bp)[:cap(*bp)], data)
	if len(c) > len(data)-len(data)/8 {
		deflateBufs.Put(bp)
		return nil
	}
	*bp = c
	return bp
}

func releaseDeflate(bp *[]byte) {
	*bp = (*bp)[:cap(*bp)]
	deflateBufs.Put(bp)
}

// inflateBufs holds buffers for inflated payloads, MaxData bytes each.
var inflateBufs = sync.Pool{New: func() any {
	b := make([]byte, MaxData)
	return &b
}}

// inflate decodes the S2 block src of at most limit (≤ MaxData) bytes. The
// block's declared length is checked before anything is allocated: a bomb
// costs nothing. The result is in the Decoder's pooled buffer, or a fresh
// one for the package-level Decode.
func (d *Decoder) inflate(src []byte, limit int) ([]byte, *DecodeError) {
	n, err := s2.DecodedLen(src)
	switch {
	case err != nil:
		return nil, &DecodeError{Kind: KindBadPayload, Detail: "not an s2 block"}
	case n == 0 || n > limit:
		return nil, &DecodeError{Kind: KindBadPayload, Detail: "s2 block of " + strconv.Itoa(n) + " bytes, limit " + strconv.Itoa(limit)}
	}
	var dst []byte
	if d.fresh {
		dst = make([]byte, n)
	} else {
		if d.inflated == nil {
			d.inflated = inflateBufs.Get().(*[]byte)
		}
		dst = (*d.inflated)[:n]
	}
	out, err := s2.Decode(dst, src)
	if err != nil || len(out) != n || (n > 0 && &out[0] != &dst[0]) {
		return nil, &DecodeError{Kind: KindBadPayload, Detail: "corrupt s2 block"}
	}
	return out, nil
}

// release gives the Decoder's inflate buffer back to the pool; the frame
// that used it is no longer valid.
func (d *Decoder) release() {
	if d.inflated != nil {
		inflateBufs.Put(d.inflated)
		d.inflated = nil
	}
}
