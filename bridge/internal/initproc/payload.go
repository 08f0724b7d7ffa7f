//go:build linux

package initproc

import (
	"errors"
	"io"
	"strconv"
)

// MaxPayload bounds the payload the init reads: more than the kernel's
// limit on argv and envp together, which the exec would refuse anyway.
const MaxPayload = 64 << 20

// Payload is what the server sends the init over the control pipe. The
// server keeps its end open as long as the process is its own; the init
// reads EOF when the server closes it (Destroy) or dies, however it dies,
// and then kills every process of the tree and exits.
type Payload struct {
	Mode string // ModePIDNamespace or ModeGuardian
	Path string // the executable, resolved
	Argv []string
	Env  []string
	// Rlimits are set in the init before the child is started, which
	// inherits them.
	Rlimits []Rlimit
	// Harden is what the init applies to itself before it forks the
	// child, which inherits it (Harden.Apply); nil for none. With it, the
	// init stays root and the child is switched to its user.
	Harden *Harden
	// Dir is the child's working directory, entered by the forked child
	// after it switched to its user.
	Dir string
	// TTY: fds 0, 1 and 2 are a terminal's slave; the child becomes a
	// session leader with it as its controlling terminal (TTYSysProcAttr).
	TTY bool
}

// Rlimit is one setrlimit(2) call.
type Rlimit struct {
	Resource int
	Cur, Max uint64
}

// The payload on the pipe is a 4-byte big-endian length, then the fields
// of Payload in order: a string as its length (uvarint) and bytes, a list
// as its length and items, a number as a uvarint, a flag and a presence
// as one byte. Not JSON: the init must not wait for encoding/json's
// initialisation (see the package doc).

// WritePayload sends pl on w, the control pipe.
func WritePayload(w io.Writer, pl *Payload) error {
	var e enc
	e.b = make([]byte, 4, 256)
	e.str(pl.Mode)
	e.str(pl.Path)
	e.strs(pl.Argv)
	e.strs(pl.Env)
	e.rlimits(pl.Rlimits)
	e.harden(pl.Harden)
	e.str(pl.Dir)
	e.flag(pl.TTY)
	size := len(e.b) - 4
	if size > MaxPayload {
		return errors.New("init payload of " + strconv.Itoa(size) + " bytes exceeds " + strconv.Itoa(MaxPayload))
	}
	e.b[0], e.b[1], e.b[2], e.b[3] = byte(size>>24), byte(size>>16), byte(size>>8), byte(size)
	_, err := w.Write(e.b)
	return err
}

// ReadPayload reads the payload WritePayload sent.
func ReadPayload(r io.Reader) (*Payload, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := int(n[0])<<24 | int(n[1])<<16 | int(n[2])<<8 | int(n[3])
	if size > MaxPayload {
		return nil, errors.New("init payload of " + strconv.Itoa(size) + " bytes exceeds " + strconv.Itoa(MaxPayload))
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return DecodePayload(b)
}

// DecodePayload decodes the payload's bytes, after its length.
func DecodePayload(b []byte) (*Payload, error) {
	d := dec{b: b}
	pl := &Payload{Mode: d.str(), Path: d.str(), Argv: d.strs(), Env: d.strs(), Rlimits: d.rlimits()}
	pl.Harden = d.harden()
	pl.Dir, pl.TTY = d.str(), d.flag()
	switch {
	case d.err != nil:
		return nil, d.err
	case len(d.b) != 0:
		return nil, errors.New("init payload: " + strconv.Itoa(len(d.b)) + " bytes after its end")
	case pl.Mode != ModePIDNamespace && pl.Mode != ModeGuardian:
		return nil, errors.New("init mode " + strconv.Quote(pl.Mode))
	}
	return pl, nil
}

// enc appends the payload's fields.
type enc struct{ b []byte }

func (e *enc) uint(v uint64) {
	for ; v >= 0x80; v >>= 7 {
		e.b = append(e.b, byte(v)|0x80)
	}
	e.b = append(e.b, byte(v))
}

func (e *enc) str(s string) { e.uint(uint64(len(s))); e.b = append(e.b, s...) }

// putList writes the count of items, then each with put.
func putList[T any](e *enc, items []T, put func(T)) {
	e.uint(uint64(len(items)))
	for _, it := range items {
		put(it)
	}
}

func (e *enc) strs(ss []string) { putList(e, ss, e.str) }

func (e *enc) flag(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

func (e *enc) rlimits(rs []Rlimit) {
	putList(e, rs, func(r Rlimit) {
		e.uint(uint64(r.Resource))
		e.uint(r.Cur)
		e.uint(r.Max)
	})
}

func (e *enc) uints(vs []uint64) { putList(e, vs, e.uint) }

func (e *enc) harden(h *Harden) {
	e.flag(h != nil)
	if h == nil {
		return
	}
	e.flag(h.NoNewPrivs)
	caps := make([]uint64, len(h.KeepCaps))
	for i, c := range h.KeepCaps {
		caps[i] = uint64(c)
	}
	e.uints(caps)
	e.uint(uint64(h.Umask))
	e.rlimits(h.Rlimits)
	e.flag(h.Cred != nil)
	if h.Cred != nil {
		e.uint(uint64(h.Cred.UID))
		e.uint(uint64(h.Cred.GID))
		groups := make([]uint64, len(h.Cred.Groups))
		for i, g := range h.Cred.Groups {
			groups[i] = uint64(g)
		}
		e.uints(groups)
	}
	e.flag(h.PrivateProc)
}

// dec reads the payload's fields; the first error sticks and every later
// read returns a zero value.
type dec struct {
	b   []byte
	err error
}

var errShort = errors.New("init payload: truncated or malformed")

func (d *dec) uint() uint64 {
	var v uint64
	for i, c := range d.b {
		if i == 10 {
			break
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			d.b = d.b[i+1:]
			return v
		}
	}
	d.fail()
	return 0
}

func (d *dec) fail() {
	if d.err == nil {
		d.err = errShort
	}
	d.b = nil
}

// count reads a length that must fit in what is left, each item taking at
// least one byte, so that no length makes it allocate more than it read.
func (d *dec) count() int {
	n := d.uint()
	if n > uint64(len(d.b)) {
		d.fail()
		return 0
	}
	return int(n)
}

func (d *dec) str() string {
	n := d.count()
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// list reads a count, then that many items with item; nil for none.
func list[T any](d *dec, item func() T) []T {
	n := d.count()
	if n == 0 {
		return nil
	}
	items := make([]T, n)
	for i := range items {
		items[i] = item()
	}
	return items
}

func (d *dec) strs() []string { return list(d, d.str) }

func (d *dec) flag() bool {
	if len(d.b) == 0 {
		d.fail()
		return false
	}
	v := d.b[0]
	d.b = d.b[1:]
	if v > 1 {
		d.fail()
	}
	return v == 1
}

// small reads a number that must fit in 32 bits.
func (d *dec) small() uint64 {
	v := d.uint()
	if v > 1<<32-1 {
		d.fail()
		return 0
	}
	return v
}

func (d *dec) rlimits() []Rlimit {
	return list(d, func() Rlimit { return Rlimit{Resource: int(d.small()), Cur: d.uint(), Max: d.uint()} })
}

func (d *dec) smalls() []uint64 { return list(d, d.small) }

func (d *dec) harden() *Harden {
	if !d.flag() {
		return nil
	}
	h := &Harden{NoNewPrivs: d.flag()}
	for _, c := range d.smalls() {
		h.KeepCaps = append(h.KeepCaps, uintptr(c))
	}
	h.Umask = int(d.small())
	h.Rlimits = d.rlimits()
	if d.flag() {
		h.Cred = &Cred{UID: uint32(d.small()), GID: uint32(d.small())}
		for _, g := range d.smalls() {
			h.Cred.Groups = append(h.Cred.Groups, uint32(g))
		}
	}
	h.PrivateProc = d.flag()
	return h
}
