package frames

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// Decoder decodes frames strictly (PROTOCOL.md §2, §3, §8) with its own
// JSON scanner: no reflection, no encoding/json.
//
// The frames it returns of the hot types (*Stdin, *Stdout, *Stderr, *Ack,
// *Credit, *StdoutEOF, *StdinClose, *Ping, *Pong) are owned by the Decoder and reused:
// they, and their Data, are valid until the next call of Decode. Frames of
// the other types are freshly allocated and belong to the caller. Decoding a
// data frame allocates nothing once the Decoder's buffer has grown.
//
// The zero value is ready to use. A Decoder is not safe for concurrent use.
type Decoder struct {
	// MaxLine is the longest line accepted, in bytes counting the '\n'
	// (present or not). 0 means MaxLine.
	MaxLine int
	// MaxData bounds the inflated payload of a compressed data frame, in
	// bytes: the max_data announced in opened. 0 or more than MaxData means
	// MaxData. A block declaring more is refused (bad_payload) before any
	// memory is allocated for it.
	MaxData int
	// Into, when set, is asked for the buffer the payload of a data frame
	// of type t, at most n bytes, is decoded into in place of the
	// Decoder's own; it returns a slice of length n, or nil to decline.
	// Only a frame in the canonical form (the form every procwire peer
	// writes) is decoded into it; the frame's Data is then a prefix of
	// that slice, and the Decoder keeps no reference to it. A receiver
	// can so decode a payload straight into the queue it is read from.
	Into func(t Type, n int) []byte

	fresh bool // allocate every frame and payload (package-level Decode)

	s       []byte // the line being decoded, without its '\n'
	i       int    // read position in s
	frame   string // wire name of the frame, once known
	typeEnd int    // position just after the type member's value

	scratch []byte // unescaped strings
	data    []byte // decoded payload of the last data frame

	inflated *[]byte // pooled inflate buffer of the last data frame, if any

	stdin      Stdin
	stdout     Stdout
	stderr     Stderr
	ack        Ack
	credit     Credit
	stdoutEOF  StdoutEOF
	stdinClose StdinClose
	ping       Ping
	pong       Pong
}

// Decode decodes one frame from line, which may end in its '\n'. See the
// Decoder's doc for who owns the result. A refused line gives a
// *DecodeError; Decode never panics.
func (d *Decoder) Decode(line []byte) (Frame, error) {
	d.release()
	f, err := d.decodeLine(line)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// Decode decodes one frame into values owned by the caller. It is the
// convenient, allocating form of Decoder.Decode.
func Decode(line []byte) (Frame, error) {
	d := Decoder{fresh: true}
	return d.Decode(line)
}

func (d *Decoder) decodeLine(line []byte) (Frame, *DecodeError) {
	limit := d.MaxLine
	if limit <= 0 {
		limit = MaxLine
	}
	body := line
	if n := len(body); n > 0 && body[n-1] == '\n' {
		body = body[:n-1]
	}
	if len(body)+1 > limit {
		return nil, &DecodeError{Kind: KindLineTooLong, Detail: "over " + strconv.Itoa(limit) + " bytes"}
	}
	if f := d.fast(body); f != nil {
		return f, nil
	}
	f, err := d.decode(body)
	d.s = nil // do not hold on to the caller's line
	return f, err
}

// fast decodes a data frame in exactly the canonical form, and returns nil
// for anything else, which the general path then decodes (or refuses).
// Both paths give the same result for every line they both accept.
func (d *Decoder) fast(b []byte) Frame {
	var p string
	var t Type
	switch {
	case len(b) < len(prefixStdout)+len(infixData)+6:
		return nil
	case string(b[:len(prefixStdout)]) == prefixStdout:
		p, t = prefixStdout, TypeStdout
	case string(b[:len(prefixStderr)]) == prefixStderr:
		p, t = prefixStderr, TypeStderr
	case string(b[:len(prefixStdin)]) == prefixStdin:
		p, t = prefixStdin, TypeStdin
	default:
		return nil
	}
	i := len(p)
	off, n, ok := canonicalInt(b[i:])
	if !ok {
		return nil
	}
	i += n
	if len(b) < i+len(infixData)+2 || string(b[i:i+len(infixData)]) != infixData ||
		b[len(b)-2] != '"' || b[len(b)-1] != '}' {
		return nil
	}
	data, ok := d.quickData(t, b[i+len(infixData):len(b)-2])
	if !ok {
		return nil
	}
	switch p {
	case prefixStdout:
		if d.fresh {
			return &Stdout{Off: off, Data: data}
		}
		d.stdout = Stdout{Off: off, Data: data}
		return &d.stdout
	case prefixStderr:
		if d.fresh {
			return &Stderr{Off: off, Data: data}
		}
		d.stderr = Stderr{Off: off, Data: data}
		return &d.stderr
	default:
		if d.fresh {
			return &Stdin{Off: off, Data: data}
		}
		d.stdin = Stdin{Off: off, Data: data}
		return &d.stdin
	}
}

// canonicalInt parses the shortest decimal form of a non-negative int64 at
// the start of b, returning its length.
func canonicalInt(b []byte) (v int64, n int, ok bool) {
	var u uint64
	for n < len(b) && isDigit(b[n]) {
		if n == 19 {
			return 0, 0, false
		}
		u = u*10 + uint64(b[n]-'0')
		n++
	}
	if n == 0 || n > 1 && b[0] == '0' || u > math.MaxInt64 {
		return 0, 0, false
	}
	return int64(u), n, true
}

// quickData decodes raw, the bytes between the quotes of a data string, if
// it is padded strict base64 of 1..MaxData bytes without escapes. Otherwise
// it reports false and the caller takes the slow, exact path. A payload of
// a frame of type t goes into the buffer Into gives, if it gives one.
func (d *Decoder) quickData(t Type, raw []byte) ([]byte, bool) {
	n := len(raw)
	if n == 0 || n%4 != 0 {
		return nil, false
	}
	want := n / 4 * 3
	if raw[n-1] == '=' {
		want--
		if raw[n-2] == '=' {
			want--
		}
	}
	if want > MaxData {
		return nil, false
	}
	var buf []byte
	if d.Into != nil && t != 0 && !d.fresh {
		buf = d.Into(t, n/4*3)
	}
	if len(buf) < n/4*3 {
		buf = d.dataBuf(n / 4 * 3)
	}
	m, ok := decodeBase64(buf, raw)
	return buf[:m], ok
}

// dataBuf returns a buffer of n bytes for a payload: the Decoder's own,
// grown as needed, or a fresh one.
func (d *Decoder) dataBuf(n int) []byte {
	if d.fresh {
		return make([]byte, n)
	}
	if cap(d.data) < n {
		// n is at most MaxData+2: the buffer never grows past that.
		d.data = make([]byte, max(n, 4096, min(2*cap(d.data), MaxData+2)))
	}
	return d.data[:n]
}

// decode is the general strict path.
func (d *Decoder) decode(body []byte) (Frame, *DecodeError) {
	d.s, d.i, d.frame = body, 0, ""
	if len(body) == 0 || body[0] != '{' {
		return nil, d.syntax("a frame starts with '{'")
	}
	typ, first, err := d.resolveType()
	if err != nil {
		return nil, err
	}
	s := schemas[typ]
	d.frame = s.name
	obj := d.newFrame(typ)
	if first {
		d.i = d.typeEnd
	} else {
		d.i = 0
	}
	if err := d.object(s, obj, "", first); err != nil {
		return nil, err
	}
	if d.i != len(d.s) {
		return nil, d.fail("", KindTrailingData, "after the object at offset "+strconv.Itoa(d.i))
	}
	return obj.(Frame), nil
}

// newFrame returns a zeroed frame of type t: the Decoder's own for the hot
// types, a fresh one otherwise.
func (d *Decoder) newFrame(t Type) fielder {
	if !d.fresh {
		switch t {
		case TypeStdin:
			d.stdin = Stdin{}
			return &d.stdin
		case TypeStdout:
			d.stdout = Stdout{}
			return &d.stdout
		case TypeStderr:
			d.stderr = Stderr{}
			return &d.stderr
		case TypeAck:
			d.ack = Ack{}
			return &d.ack
		case TypeCredit:
			d.credit = Credit{}
			return &d.credit
		case TypeStdoutEOF:
			d.stdoutEOF = StdoutEOF{}
			return &d.stdoutEOF
		case TypeStdinClose:
			d.stdinClose = StdinClose{}
			return &d.stdinClose
		case TypePing:
			d.ping = Ping{}
			return &d.ping
		case TypePong:
			d.pong = Pong{}
			return &d.pong
		}
	}
	switch t {
	case TypeOpen:
		return new(Open)
	case TypeResume:
		return new(Resume)
	case TypeStdin:
		return new(Stdin)
	case TypeStdinClose:
		return new(StdinClose)
	case TypeAck:
		return new(Ack)
	case TypeSignal:
		return new(Signal)
	case TypeDestroy:
		return new(Destroy)
	case TypeOpened:
		return new(Opened)
	case TypeResumed:
		return new(Resumed)
	case TypeCredit:
		return new(Credit)
	case TypeStdout:
		return new(Stdout)
	case TypeStdoutEOF:
		return new(StdoutEOF)
	case TypeStderr:
		return new(Stderr)
	case TypeExit:
		return new(Exit)
	case TypeSignaled:
		return new(Signaled)
	case TypeDestroyed:
		return new(Destroyed)
	case TypeError:
		return new(Error)
	case TypePing:
		return new(Ping)
	case TypePong:
		return new(Pong)
	case TypeResize:
		return new(Resize)
	}
	panic("frames: no frame for type " + t.String())
}

// resolveType reads the top-level members from the left until the member
// "type", checking the syntax of what it passes, and returns the frame type
// and whether type was the first member. d.typeEnd is set past its value.
func (d *Decoder) resolveType() (Type, bool, *DecodeError) {
	d.i = 1
	d.ws()
	if d.peek() == '}' {
		return 0, false, &DecodeError{Field: "type", Kind: KindMissingField}
	}
	for n := 0; ; n++ {
		if d.peek() != '"' {
			return 0, false, d.syntax("expected a key")
		}
		key, err := d.readString()
		if err != nil {
			return 0, false, err
		}
		if err := d.colon(); err != nil {
			return 0, false, err
		}
		if string(key) == "type" {
			if d.peek() != '"' {
				return 0, false, d.wrongType("type", "string")
			}
			v, err := d.readString()
			if err != nil {
				return 0, false, err
			}
			t, ok := typeByName[string(v)]
			if !ok {
				return 0, false, &DecodeError{Field: "type", Kind: KindUnknownType, Detail: strconv.Quote(string(v))}
			}
			d.typeEnd = d.i
			return t, n == 0, nil
		}
		if err := d.skip(2); err != nil {
			return 0, false, err
		}
		d.ws()
		switch d.peek() {
		case ',':
			d.i++
			d.ws()
		case '}':
			return 0, false, &DecodeError{Field: "type", Kind: KindMissingField}
		default:
			return 0, false, d.syntax("expected ',' or '}'")
		}
	}
}

// object decodes the members of an object described by s into obj. With
// resume set, the '{' and the type member have been read already.
func (d *Decoder) object(s *schema, obj fielder, parent string, resume bool) *DecodeError {
	var seen uint32
	if resume {
		seen = 1
	} else {
		d.i++ // '{'
		d.ws()
		if d.peek() == '}' {
			d.i++
			return d.end(s, obj, seen, parent)
		}
	}
	for member := !resume; ; member = true {
		if member {
			if d.peek() != '"' {
				return d.syntax("expected a key")
			}
			key, err := d.readString()
			if err != nil {
				return err
			}
			i := s.index(key)
			if i < 0 {
				kind := KindUnknownField
				if s.foldIndex(key) >= 0 {
					kind = KindCaseVariantKey
				}
				return d.fail(join(parent, string(key)), kind, "")
			}
			fd := &s.fields[i]
			if seen&(1<<i) != 0 {
				return d.fail(join(parent, fd.name), KindDuplicateKey, "")
			}
			if err := s.onKey(seen, i); err != nil {
				err.Frame = d.frame
				return err
			}
			seen |= 1 << i
			if err := d.colon(); err != nil {
				return err
			}
			if fd.rule == rType {
				d.i = d.typeEnd // checked by resolveType
			} else if err := d.value(fd, obj.field(i), parent); err != nil {
				return err
			}
		}
		d.ws()
		switch d.peek() {
		case ',':
			d.i++
			d.ws()
		case '}':
			d.i++
			return d.end(s, obj, seen, parent)
		default:
			return d.syntax("expected ',' or '}'")
		}
	}
}

func (d *Decoder) end(s *schema, obj fielder, seen uint32, parent string) *DecodeError {
	if err := s.atEnd(obj, seen, parent); err != nil {
		err.Frame = d.frame
		return err
	}
	if s.typ == TypeStdin || s.typ == TypeStdout || s.typ == TypeStderr {
		if enc := obj.field(3).(*string); *enc != "" {
			limit := d.MaxData
			if limit <= 0 || limit > MaxData {
				limit = MaxData
			}
			p := obj.field(2).(*[]byte)
			raw, err := d.inflate(*p, limit)
			if err != nil {
				err.Frame, err.Field = d.frame, "data"
				return err
			}
			*p = raw
		}
	}
	return nil
}

// value decodes the value of field fd into p. Within one value the checks
// run in a fixed order: syntax of the token, JSON type, then the rules.
func (d *Decoder) value(fd *field, p any, parent string) *DecodeError {
	path := func() string { return join(parent, fd.name) }
	c := d.peek()
	switch fd.rule {
	case rInt:
		if c != '-' && !isDigit(c) {
			return d.wrongType(path(), "integer")
		}
		v, err := d.integer(path)
		if err != nil {
			return err
		}
		if v < fd.min || v > fd.max {
			return d.fail(path(), KindOutOfBounds, fmt.Sprintf("%d outside %d..%d", v, fd.min, fd.max))
		}
		switch p := p.(type) {
		case *int64:
			*p = v
		case *int:
			*p = int(v)
		}
		return nil
	case rBool:
		switch c {
		case 't':
			if err := d.literal("true"); err != nil {
				return err
			}
			*p.(*bool) = true
			return nil
		case 'f':
			if err := d.literal("false"); err != nil {
				return err
			}
			*p.(*bool) = false
			return nil
		}
		return d.wrongType(path(), "boolean")
	case rData:
		if c != '"' {
			return d.wrongType(path(), "base64 string")
		}
		return d.dataValue(p.(*[]byte), path)
	case rArgs:
		if c != '[' {
			return d.wrongType(path(), "array")
		}
		return d.arguments(p.(*[]string), path())
	case rEnv:
		if c != '{' {
			return d.wrongType(path(), "object")
		}
		return d.environment(p.(*map[string]string), path())
	case rObject:
		if c != '{' {
			return d.wrongType(path(), "object")
		}
		obj, ok := p.(fielder)
		if g, isGap := p.(**Gap); isGap {
			*g = new(Gap)
			obj, ok = *g, true
		}
		if l, isLimits := p.(**Limits); isLimits {
			*l = new(Limits)
			obj, ok = *l, true
		}
		if t, isTTY := p.(**TTY); isTTY {
			*t = new(TTY)
			obj, ok = *t, true
		}
		if !ok {
			panic("frames: no binding for " + fd.name)
		}
		return d.object(fd.sub, obj, path(), false)
	}
	if c != '"' {
		return d.wrongType(path(), "string")
	}
	b, err := d.readString()
	if err != nil {
		return err
	}
	if k, detail := checkString(fd.rule, b); k != "" {
		return d.fail(path(), k, detail)
	}
	switch p := p.(type) {
	case *string:
		*p = intern(b)
	case *SignalName:
		*p = SignalName(intern(b))
	case *ErrorCode:
		*p = ErrorCode(intern(b))
	}
	return nil
}

// interned holds the vocabulary strings, so decoding them allocates nothing.
var interned = func() map[string]string {
	m := map[string]string{WireRevision: WireRevision, SignalDelivered: SignalDelivered,
		SignalAlreadyExited: SignalAlreadyExited, EncS2: EncS2, ExitReasonOOM: ExitReasonOOM}
	for s := range exitSignals {
		m[s] = s
	}
	for _, c := range []ErrorCode{CapabilityUnavailable, FileTooLarge, InstanceNotFound,
		LifecycleConflict, OperationFailed, OutputLimitExceeded, SnapshotForbidden, SnapshotNotFound} {
		m[string(c)] = string(c)
	}
	return m
}()

func intern(b []byte) string {
	if s, ok := interned[string(b)]; ok {
		return s
	}
	return string(b)
}

// integer reads a JSON number and returns it if it is a non-negative
// integer that fits an int64.
func (d *Decoder) integer(path func() string) (int64, *DecodeError) {
	start := d.i
	plain, err := d.number()
	if err != nil {
		return 0, err
	}
	tok := d.s[start:d.i]
	if !plain {
		return 0, d.fail(path(), KindBadInteger, "not a non-negative integer")
	}
	v, n, ok := canonicalInt(tok)
	if !ok || n != len(tok) {
		return 0, d.fail(path(), KindBadInteger, "overflows int64")
	}
	return v, nil
}

// dataValue decodes a base64 string into p, the Decoder's buffer or a
// fresh one.
func (d *Decoder) dataValue(p *[]byte, path func() string) *DecodeError {
	start := d.i + 1
	if j := bytes.IndexByte(d.s[start:], '"'); j >= 0 {
		if data, ok := d.quickData(0, d.s[start:start+j]); ok {
			*p = data
			d.i = start + j + 1
			return nil
		}
	}
	b, err := d.readString()
	if err != nil {
		return err
	}
	n := len(b)
	if n%4 != 0 || bytes.IndexByte(b, '\r') >= 0 || bytes.IndexByte(b, '\n') >= 0 {
		return d.fail(path(), KindBadBase64, "")
	}
	if n/4*3 <= MaxData+2 {
		buf := d.dataBuf(n / 4 * 3)
		m, err := b64.Decode(buf, b)
		switch {
		case err != nil:
			return d.fail(path(), KindBadBase64, "")
		case m == 0 || m > MaxData:
			return d.fail(path(), KindOutOfBounds, "data of "+strconv.Itoa(m)+" bytes")
		}
		*p = buf[:m]
		return nil
	}
	// Too long either way: validate in chunks to tell which rule is broken,
	// without a buffer for all of it.
	var tmp [3 << 10]byte
	for off := 0; off < n; off += 4 << 10 {
		chunk := b[off:min(off+4<<10, n)]
		if off+len(chunk) < n && bytes.IndexByte(chunk, '=') >= 0 {
			return d.fail(path(), KindBadBase64, "")
		}
		if _, err := b64.Decode(tmp[:], chunk); err != nil {
			return d.fail(path(), KindBadBase64, "")
		}
	}
	return d.fail(path(), KindOutOfBounds, "data over "+strconv.Itoa(MaxData)+" bytes")
}

// arguments decodes request.arguments.
func (d *Decoder) arguments(p *[]string, path string) *DecodeError {
	d.i++ // '['
	d.ws()
	var args []string
	if d.peek() == ']' {
		d.i++
		*p = args
		return nil
	}
	for {
		if len(args) == MaxArguments {
			return d.fail(path, KindOutOfBounds, "more than "+strconv.Itoa(MaxArguments)+" arguments")
		}
		if d.peek() != '"' {
			return d.wrongType(path, "string")
		}
		b, err := d.readString()
		if err != nil {
			return err
		}
		if k := checkArgument(b); k != "" {
			return d.fail(path, k, "argument "+strconv.Itoa(len(args)))
		}
		args = append(args, string(b))
		d.ws()
		switch d.peek() {
		case ',':
			d.i++
			d.ws()
		case ']':
			d.i++
			*p = args
			return nil
		default:
			return d.syntax("expected ',' or ']'")
		}
	}
}

// environment decodes request.environment.
func (d *Decoder) environment(p *map[string]string, path string) *DecodeError {
	d.i++ // '{'
	d.ws()
	env := make(map[string]string)
	*p = env
	if d.peek() == '}' {
		d.i++
		return nil
	}
	total := 0
	for {
		if len(env) == MaxEnvEntries {
			return d.fail(path, KindOutOfBounds, "more than "+strconv.Itoa(MaxEnvEntries)+" entries")
		}
		if d.peek() != '"' {
			return d.syntax("expected a key")
		}
		kb, err := d.readString()
		if err != nil {
			return err
		}
		if _, dup := env[string(kb)]; dup {
			return d.fail(path, KindDuplicateKey, "key "+strconv.Quote(string(kb)))
		}
		if !validEnvKey(kb) {
			return d.fail(path, KindBadEnvKey, "key "+strconv.Quote(string(kb)))
		}
		k := string(kb)
		if err := d.colon(); err != nil {
			return err
		}
		if d.peek() != '"' {
			return d.wrongType(path, "string")
		}
		v, err := d.readString()
		if err != nil {
			return err
		}
		if indexNul(v) >= 0 {
			return d.fail(path, KindNulByte, "value of "+strconv.Quote(k))
		}
		total += len(k) + len(v)
		if total > MaxEnvBytes {
			return d.fail(path, KindOutOfBounds, "more than "+strconv.Itoa(MaxEnvBytes)+" bytes")
		}
		env[k] = string(v)
		d.ws()
		switch d.peek() {
		case ',':
			d.i++
			d.ws()
		case '}':
			d.i++
			return nil
		default:
			return d.syntax("expected ',' or '}'")
		}
	}
}

// skip passes over one value whose container would be at depth, checking
// its syntax.
func (d *Decoder) skip(depth int) *DecodeError {
	switch c := d.peek(); c {
	case '{', '[':
		if depth > maxDepth {
			return d.syntax("nested deeper than " + strconv.Itoa(maxDepth))
		}
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		d.i++
		d.ws()
		if d.peek() == closer {
			d.i++
			return nil
		}
		for {
			if c == '{' {
				if d.peek() != '"' {
					return d.syntax("expected a key")
				}
				if _, err := d.readString(); err != nil {
					return err
				}
				if err := d.colon(); err != nil {
					return err
				}
			}
			if err := d.skip(depth + 1); err != nil {
				return err
			}
			d.ws()
			switch d.peek() {
			case ',':
				d.i++
				d.ws()
			case closer:
				d.i++
				return nil
			default:
				return d.syntax("expected ',' or '" + string(closer) + "'")
			}
		}
	default:
		return d.scalar()
	}
}

// scalar passes over one string, number or literal, checking its syntax.
func (d *Decoder) scalar() *DecodeError {
	switch c := d.peek(); {
	case c == '"':
		_, err := d.readString()
		return err
	case c == '-' || isDigit(c):
		_, err := d.number()
		return err
	case c == 't':
		return d.literal("true")
	case c == 'f':
		return d.literal("false")
	case c == 'n':
		return d.literal("null")
	}
	return d.syntax("expected a value")
}

// wrongType refuses the value at d.i, which is not of the JSON type want.
// A scalar token is checked for syntax first; an object or array is refused
// at its first byte.
func (d *Decoder) wrongType(path, want string) *DecodeError {
	if c := d.peek(); c != '{' && c != '[' {
		if err := d.scalar(); err != nil {
			return err
		}
	}
	return d.fail(path, KindWrongType, "want "+want)
}

func (d *Decoder) literal(lit string) *DecodeError {
	if len(d.s)-d.i < len(lit) || string(d.s[d.i:d.i+len(lit)]) != lit {
		return d.syntax("invalid literal")
	}
	d.i += len(lit)
	return nil
}

// number reads a JSON number (RFC 8259 grammar) and reports whether it is
// plain: no minus sign, fraction or exponent.
func (d *Decoder) number() (plain bool, err *DecodeError) {
	s, i := d.s, d.i
	plain = true
	if i < len(s) && s[i] == '-' {
		plain = false
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && isDigit(s[i]):
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	default:
		d.i = i
		return false, d.syntax("invalid number")
	}
	if i < len(s) && s[i] == '.' {
		plain = false
		i++
		if i >= len(s) || !isDigit(s[i]) {
			d.i = i
			return false, d.syntax("invalid number")
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		plain = false
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i >= len(s) || !isDigit(s[i]) {
			d.i = i
			return false, d.syntax("invalid number")
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	d.i = i
	return plain, nil
}

// readString reads the JSON string at d.i and returns its value, which
// aliases the line when it has no escapes and d.scratch otherwise: valid
// until the next readString.
func (d *Decoder) readString() ([]byte, *DecodeError) {
	s := d.s
	start := d.i + 1
	i := start
	for i < len(s) {
		c := s[i]
		if c == '"' {
			d.i = i + 1
			return s[start:i], nil
		}
		if c == '\\' || c < 0x20 || c >= 0x80 {
			break
		}
		i++
	}
	buf := append(d.scratch[:0], s[start:i]...)
	for {
		if i >= len(s) {
			d.i = i
			return nil, d.syntax("unterminated string")
		}
		c := s[i]
		switch {
		case c == '"':
			d.scratch = buf
			d.i = i + 1
			return buf, nil
		case c < 0x20:
			d.i = i
			return nil, d.syntax("control character in string")
		case c < 0x80 && c != '\\':
			buf = append(buf, c)
			i++
		case c >= 0x80:
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				d.i = i
				return nil, d.syntax("invalid UTF-8")
			}
			buf = append(buf, s[i:i+size]...)
			i += size
		default: // backslash
			if i+1 >= len(s) {
				d.i = i
				return nil, d.syntax("unterminated string")
			}
			e := s[i+1]
			i += 2
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, ok := hex4(s, i)
				if !ok {
					d.i = i
					return nil, d.syntax("invalid \\u escape")
				}
				i += 4
				if utf16IsSurrogate(r) {
					r2, ok := rune(0), false
					if r < 0xdc00 && i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
						r2, ok = hex4(s, i+2)
					}
					if !ok || r2 < 0xdc00 || r2 > 0xdfff {
						d.i = i
						return nil, d.syntax("lone surrogate")
					}
					r = 0x10000 + (r-0xd800)<<10 + (r2 - 0xdc00)
					i += 6
				}
				buf = utf8.AppendRune(buf, r)
			default:
				d.i = i - 1
				return nil, d.syntax("invalid escape")
			}
		}
	}
}

func utf16IsSurrogate(r rune) bool { return r >= 0xd800 && r <= 0xdfff }

func hex4(s []byte, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range s[i : i+4] {
		switch {
		case isDigit(c):
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// ws skips whitespace inside the object: space, tab and CR. A '\n' ends
// the line, so it is never whitespace inside a frame.
func (d *Decoder) ws() {
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ' ', '\t', '\r':
			d.i++
		default:
			return
		}
	}
}

// colon reads the ':' after a key and the whitespace around it.
func (d *Decoder) colon() *DecodeError {
	d.ws()
	if d.peek() != ':' {
		return d.syntax("expected ':'")
	}
	d.i++
	d.ws()
	return nil
}

// peek returns the byte at d.i, or 0 at the end of the line (a NUL byte is
// never valid where peek is used).
func (d *Decoder) peek() byte {
	if d.i < len(d.s) {
		return d.s[d.i]
	}
	return 0
}

func (d *Decoder) fail(field string, k Kind, detail string) *DecodeError {
	return &DecodeError{Frame: d.frame, Field: field, Kind: k, Detail: detail}
}

func (d *Decoder) syntax(msg string) *DecodeError {
	if d.i >= len(d.s) {
		msg += " at end of line"
	} else {
		msg += " at offset " + strconv.Itoa(d.i)
	}
	return d.fail("", KindSyntax, msg)
}
