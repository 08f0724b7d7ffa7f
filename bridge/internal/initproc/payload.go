//go:build linux

package initproc

import (
	"errors"
	"io"
	"strconv"
)

// MaxPayload bounds each of the payload's two messages: more than the
// kernel's limit on argv and envp together, which the exec would refuse
// anyway.
const MaxPayload = 64 << 20

// Payload is what the server sends the init over the control pipe. The
// server keeps its end open as long as the process is its own; the init
// reads EOF when the server closes it (Destroy) or dies, however it dies,
// and then kills every process of the tree and exits.
//
// It travels as two messages. The set-up (Mode, Rlimits, Harden without
// its Cred) is the same for every process of a containment with the same
// limits and hardening: the init applies it to itself and reports
// "ready", and a warm init (one started ahead of its process) does so
// while it waits. The child (Path, Argv, Env, Dir, TTY and the user it
// runs as, Harden.Cred, which differs per process with per-process uids)
// follows when there is a process to start.
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

// Each message on the pipe is a 4-byte big-endian length, then its fields
// in order: a string as its length (uvarint) and bytes, a list as its
// length and items, a number as a uvarint, a flag and a presence as one
// byte. Not JSON: the init must not wait for encoding/json's
// initialisation (see the package doc).

// WritePayload sends pl on w, the control pipe: its set-up and its child,
// in one write.
func WritePayload(w io.Writer, pl *Payload) error {
	b, err := appendSetup(nil, pl)
	if err == nil {
		b, err = appendChild(b, pl)
	}
	if err == nil {
		_, err = w.Write(b)
	}
	return err
}

// WriteSetup sends pl's set-up on w.
func WriteSetup(w io.Writer, pl *Payload) error {
	b, err := appendSetup(nil, pl)
	if err == nil {
		_, err = w.Write(b)
	}
	return err
}

// WriteChild sends pl's child on w, after its set-up.
func WriteChild(w io.Writer, pl *Payload) error {
	b, err := appendChild(nil, pl)
	if err == nil {
		_, err = w.Write(b)
	}
	return err
}

// SetupKey returns the bytes of pl's set-up: two payloads whose keys are
// equal set an init up alike.
func SetupKey(pl *Payload) string {
	b, _ := appendSetup(nil, pl)
	return string(b)
}

func appendSetup(b []byte, pl *Payload) ([]byte, error) {
	return message(b, func(e *enc) {
		e.str(pl.Mode)
		e.rlimits(pl.Rlimits)
		e.harden(pl.Harden)
	})
}

func appendChild(b []byte, pl *Payload) ([]byte, error) {
	return message(b, func(e *enc) {
		e.str(pl.Path)
		e.strs(pl.Argv)
		e.strs(pl.Env)
		e.str(pl.Dir)
		e.flag(pl.TTY)
		var cred *Cred
		if pl.Harden != nil {
			cred = pl.Harden.Cred
		}
		e.cred(cred)
	})
}

// message appends to b one message: its length, then what fields encode.
func message(b []byte, fields func(*enc)) ([]byte, error) {
	e := enc{b: append(b, 0, 0, 0, 0)}
	at := len(b)
	fields(&e)
	size := len(e.b) - at - 4
	if size > MaxPayload {
		return b, errors.New("init payload of " + strconv.Itoa(size) + " bytes exceeds " + strconv.Itoa(MaxPayload))
	}
	e.b[at], e.b[at+1], e.b[at+2], e.b[at+3] = byte(size>>24), byte(size>>16), byte(size>>8), byte(size)
	return e.b, nil
}

// ReadPayload reads the payload WritePayload sent: its set-up, then its
// child.
func ReadPayload(r io.Reader) (*Payload, error) {
	pl, err := ReadSetup(r)
	if err != nil {
		return nil, err
	}
	if err := ReadChild(r, pl); err != nil {
		return nil, err
	}
	return pl, nil
}

// ReadSetup reads a payload's set-up; ReadChild then reads its child.
func ReadSetup(r io.Reader) (*Payload, error) {
	b, err := readMessage(r)
	if err != nil {
		return nil, err
	}
	pl := &Payload{}
	if err := decodeSetup(b, pl); err != nil {
		return nil, err
	}
	return pl, nil
}

// ReadChild reads into pl, whose set-up was read, its child.
func ReadChild(r io.Reader, pl *Payload) error {
	b, err := readMessage(r)
	if err != nil {
		return err
	}
	return decodeChild(b, pl)
}

// readMessage reads one message's length and bytes.
func readMessage(r io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := messageSize(n[:])
	if size > MaxPayload {
		return nil, errors.New("init payload of " + strconv.Itoa(size) + " bytes exceeds " + strconv.Itoa(MaxPayload))
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}

// messageSize reads a message's length, b's first 4 bytes.
func messageSize(b []byte) int {
	return int(b[0])<<24 | int(b[1])<<16 | int(b[2])<<8 | int(b[3])
}

// DecodePayload decodes the payload's bytes as they travel: both
// messages, each with its length.
func DecodePayload(b []byte) (*Payload, error) {
	pl := &Payload{}
	for _, decode := range []func([]byte, *Payload) error{decodeSetup, decodeChild} {
		if len(b) < 4 {
			return nil, errShort
		}
		size := messageSize(b)
		if size > len(b)-4 {
			return nil, errShort
		}
		if err := decode(b[4:4+size], pl); err != nil {
			return nil, err
		}
		b = b[4+size:]
	}
	if len(b) != 0 {
		return nil, errors.New("init payload: " + strconv.Itoa(len(b)) + " bytes after its end")
	}
	return pl, nil
}

func decodeSetup(b []byte, pl *Payload) error {
	d := dec{b: b}
	pl.Mode, pl.Rlimits, pl.Harden = d.str(), d.rlimits(), d.harden()
	if err := d.end(); err != nil {
		return err
	}
	if pl.Mode != ModePIDNamespace && pl.Mode != ModeGuardian {
		return errors.New("init mode " + strconv.Quote(pl.Mode))
	}
	return nil
}

func decodeChild(b []byte, pl *Payload) error {
	d := dec{b: b}
	pl.Path, pl.Argv, pl.Env, pl.Dir, pl.TTY = d.str(), d.strs(), d.strs(), d.str(), d.flag()
	cred := d.cred()
	if err := d.end(); err != nil {
		return err
	}
	if cred != nil {
		if pl.Harden == nil {
			return errors.New("init payload: a user without hardening")
		}
		pl.Harden.Cred = cred
	}
	return nil
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
	e.flag(h.PrivateProc)
}

// cred writes a presence, then c.
func (e *enc) cred(c *Cred) {
	e.flag(c != nil)
	if c == nil {
		return
	}
	e.uint(uint64(c.UID))
	e.uint(uint64(c.GID))
	groups := make([]uint64, len(c.Groups))
	for i, g := range c.Groups {
		groups[i] = uint64(g)
	}
	e.uints(groups)
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
	h.PrivateProc = d.flag()
	return h
}

func (d *dec) cred() *Cred {
	if !d.flag() {
		return nil
	}
	c := &Cred{UID: uint32(d.small()), GID: uint32(d.small())}
	for _, g := range d.smalls() {
		c.Groups = append(c.Groups, uint32(g))
	}
	return c
}

// end reports the first error, or bytes left after the message's end.
func (d *dec) end() error {
	if d.err != nil {
		return d.err
	}
	if len(d.b) != 0 {
		return errors.New("init payload: " + strconv.Itoa(len(d.b)) + " bytes after its end")
	}
	return nil
}
