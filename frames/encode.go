package frames

import (
	"encoding/base64"
	"io"
	"maps"
	"slices"
	"strconv"
)

// b64 is the one base64 codec of the wire: standard alphabet, padded, and
// strict about the unused bits of the last quantum, so that every accepted
// text re-encodes byte for byte.
var b64 = base64.StdEncoding.Strict()

// Canonical prefixes of the data frames; the encoder writes them and the
// decoder's fast path recognises them.
const (
	prefixStdin  = `{"type":"stdin","off":`
	prefixStdout = `{"type":"stdout","off":`
	prefixStderr = `{"type":"stderr","off":`
	infixData    = `,"data":"`
)

// Append appends the canonical encoding of f (PROTOCOL.md §2) and a '\n' to
// dst and returns the extended buffer. It does not check f: a frame that
// Validate refuses encodes to bytes the decoder refuses with the same error.
// Append panics if f is nil or not a frame type of this package.
//
// Data frames, ack, credit, stdout_eof and stdin_close encode without
// allocating when dst has room.
func Append(dst []byte, f Frame) []byte {
	switch f := f.(type) {
	case *Stdout:
		return appendData(dst, prefixStdout, f.Off, f.Data, f.Enc)
	case *Stderr:
		return appendData(dst, prefixStderr, f.Off, f.Data, f.Enc)
	case *Stdin:
		return appendData(dst, prefixStdin, f.Off, f.Data, f.Enc)
	}
	s, obj := schemaOf(f)
	if s == nil {
		panic("frames: Append of a nil or foreign frame")
	}
	return append(appendObject(dst, s, obj), '\n')
}

func appendData(dst []byte, prefix string, off int64, data []byte, enc string) []byte {
	dst = append(dst, prefix...)
	dst = strconv.AppendInt(dst, off, 10)
	dst = append(dst, infixData...)
	if enc == EncS2 {
		if c := deflate(data); c != nil {
			dst = appendBase64(dst, *c)
			releaseDeflate(c)
			return append(dst, `","enc":"s2"}`+"\n"...)
		}
	}
	dst = appendBase64(dst, data)
	return append(dst, "\"}\n"...)
}

func appendObject(dst []byte, s *schema, obj fielder) []byte {
	dst = append(dst, '{')
	sep := false
	for i := range s.fields {
		fd := &s.fields[i]
		if fd.rule != rType && !s.present(obj, i) {
			continue
		}
		if sep {
			dst = append(dst, ',')
		}
		sep = true
		dst = append(dst, '"')
		dst = append(dst, fd.name...)
		dst = append(dst, `":`...)
		if fd.rule == rType {
			dst = appendString(dst, s.name)
		} else {
			dst = appendValue(dst, fd, obj.field(i))
		}
	}
	return append(dst, '}')
}

func appendValue(dst []byte, fd *field, p any) []byte {
	switch p := p.(type) {
	case *int64:
		return strconv.AppendInt(dst, *p, 10)
	case *int:
		return strconv.AppendInt(dst, int64(*p), 10)
	case *string:
		return appendString(dst, *p)
	case *bool:
		return strconv.AppendBool(dst, *p)
	case *SignalName:
		return appendString(dst, string(*p))
	case *ErrorCode:
		return appendString(dst, string(*p))
	case *[]byte:
		dst = append(dst, '"')
		dst = appendBase64(dst, *p)
		return append(dst, '"')
	case *[]string:
		dst = append(dst, '[')
		for i, a := range *p {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, a)
		}
		return append(dst, ']')
	case *map[string]string:
		dst = append(dst, '{')
		for i, k := range slices.Sorted(maps.Keys(*p)) {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, k)
			dst = append(dst, ':')
			dst = appendString(dst, (*p)[k])
		}
		return append(dst, '}')
	case **Gap:
		return appendObject(dst, fd.sub, *p)
	case **Limits:
		return appendObject(dst, fd.sub, *p)
	case **TTY:
		return appendObject(dst, fd.sub, *p)
	case fielder:
		return appendObject(dst, fd.sub, p)
	}
	panic("frames: no encoding for " + fd.name)
}

// needsEscape marks the bytes a canonical string escapes.
var needsEscape = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string escaped minimally: \" \\ \b \f
// \n \r \t, other control characters as \u00xx, everything else raw.
// Invalid UTF-8 is copied as is (and refused by any decoder).
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !needsEscape[c] {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// Writer writes frames as NDJSON, one canonical line each, to an
// io.Writer. It is not safe for concurrent use.
type Writer struct {
	w   io.Writer
	buf []byte
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// WriteFrame validates f, encodes it into the Writer's reused buffer and
// writes it with one Write call. An invalid frame is refused with Validate's
// *DecodeError and nothing is written.
func (w *Writer) WriteFrame(f Frame) error {
	if err := Validate(f); err != nil {
		return err
	}
	w.buf = Append(w.buf[:0], f)
	_, err := w.w.Write(w.buf)
	return err
}
