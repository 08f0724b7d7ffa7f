package frames

import (
	"bytes"
	"io"
	"strconv"
)

// Reader reads NDJSON frames from a byte stream, one line each, with a
// maximum line length. It never buffers more than the limit (or 4 KiB when
// the limit is smaller), however long a line is. It is not safe for
// concurrent use.
type Reader struct {
	r     io.Reader
	limit int
	buf   []byte
	rd    int   // start of unread data in buf
	wr    int   // end of data in buf
	seen  int   // buf[rd:seen] holds no '\n'
	skip  bool  // discard up to the next '\n' first: the last line was too long
	err   error // sticky error of r, returned once buf is drained
	dec   Decoder
}

// minBuffer is the smallest buffer a Reader reads into.
const minBuffer = 4 << 10

// NewReader returns a Reader on r refusing lines longer than maxLine bytes
// (counting the '\n'); 0 means MaxLine.
func NewReader(r io.Reader, maxLine int) *Reader {
	rd := &Reader{r: r}
	rd.SetMaxLine(maxLine)
	return rd
}

// SetMaxLine changes the limit for the lines read from now on, such as
// MaxFirstLine for the first frame of a connection and MaxLine after it.
// 0 means MaxLine. Lowering it also gives back a buffer grown past it.
func (r *Reader) SetMaxLine(n int) {
	if n <= 0 {
		n = MaxLine
	}
	r.limit = n
	if size := max(n, minBuffer); cap(r.buf) > size && r.wr-r.rd <= size {
		buf := make([]byte, size)
		r.wr = copy(buf, r.buf[r.rd:r.wr])
		r.seen -= r.rd
		r.rd = 0
		r.buf = buf
	}
}

// Buffered returns the number of bytes read from the underlying reader and
// not yet returned as (or skipped with) a line.
func (r *Reader) Buffered() int { return r.wr - r.rd }

// ReadLine returns the next line, including its '\n'; it is valid until the
// next call. A line over the limit is refused with a *DecodeError of kind
// line_too_long, after reading no more of it than the limit; the next call
// discards the rest of that line and goes on with the one after it. At the
// end of the stream ReadLine returns io.EOF, or io.ErrUnexpectedEOF when
// the last line has no '\n'. An error of the underlying reader is returned
// once the lines before it have been, and again on every later call.
func (r *Reader) ReadLine() ([]byte, error) {
	if r.skip {
		if err := r.discard(); err != nil {
			return nil, err
		}
	}
	for {
		end := min(r.wr, r.rd+r.limit)
		if r.seen < end {
			if j := bytes.IndexByte(r.buf[r.seen:end], '\n'); j >= 0 {
				line := r.buf[r.rd : r.seen+j+1]
				r.rd = r.seen + j + 1
				r.seen = r.rd
				return line, nil
			}
			r.seen = end
		}
		if r.wr-r.rd >= r.limit {
			r.skip = true
			return nil, &DecodeError{Kind: KindLineTooLong, Detail: "over " + strconv.Itoa(r.limit) + " bytes"}
		}
		if r.err != nil {
			if r.err == io.EOF && r.wr > r.rd {
				r.rd, r.seen = r.wr, r.wr
				return nil, io.ErrUnexpectedEOF
			}
			return nil, r.err
		}
		r.fill()
	}
}

// discard drops input up to and including the next '\n'.
func (r *Reader) discard() error {
	for {
		if j := bytes.IndexByte(r.buf[r.rd:r.wr], '\n'); j >= 0 {
			r.rd += j + 1
			r.seen = r.rd
			r.skip = false
			return nil
		}
		r.rd, r.wr, r.seen = 0, 0, 0
		if r.err != nil {
			r.skip = false
			return r.err
		}
		r.fill()
	}
}

// fill reads once into the buffer, making room first: moving the unread
// data to the front, or growing the buffer up to the limit.
func (r *Reader) fill() {
	if r.rd > 0 && (r.wr == len(r.buf) || r.rd == r.wr) {
		n := copy(r.buf, r.buf[r.rd:r.wr])
		r.seen -= r.rd
		r.rd, r.wr = 0, n
	}
	if r.wr == len(r.buf) {
		size := max(minBuffer, min(2*len(r.buf), r.limit))
		if size <= len(r.buf) {
			size = len(r.buf) + minBuffer // limit below what is buffered (SetMaxLine)
		}
		buf := make([]byte, size)
		copy(buf, r.buf[:r.wr])
		r.buf = buf
	}
	for range 100 {
		n, err := r.r.Read(r.buf[r.wr:])
		if n < 0 || n > len(r.buf)-r.wr {
			panic("frames: reader returned an impossible count")
		}
		r.wr += n
		if err != nil {
			r.err = err
			return
		}
		if n > 0 {
			return
		}
	}
	r.err = io.ErrNoProgress
}

// Next reads and decodes the next frame. Errors and ownership are those of
// ReadLine and Decoder.Decode: a hot frame is valid until the next call.
func (r *Reader) Next() (Frame, error) {
	line, err := r.ReadLine()
	if err != nil {
		return nil, err
	}
	r.dec.MaxLine = r.limit
	return r.dec.Decode(line)
}
