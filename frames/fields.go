package frames

import (
	"math"
	"unicode/utf8"
)

// This file describes every frame once, as a table of fields in canonical
// order. The encoder, the decoder, Validate and Equal all walk these tables;
// the only per-frame code is the field method binding a table index to a
// struct field, and the few cross-field rules in onKey and atEnd.

// rule says how a field's value is checked and stored.
type rule uint8

const (
	rType       rule = iota // the type member itself
	rInt                    // integer in [min, max]; *int64 or *int
	rText                   // free string: no NUL, 1..MaxStringBytes bytes
	rPath                   // rText that starts with '/'
	rInstanceID             // instance_id pattern
	rProcessID              // 32 lowercase hex
	rToken                  // 64 lowercase hex
	rDigest                 // sha256:<64 hex>
	rTime                   // canonical timestamp
	rWire                   // exactly WireRevision
	rSignal                 // SIGINT, SIGTERM, SIGKILL
	rExitSignal             // ExitSignalName
	rResult                 // SignalDelivered, SignalAlreadyExited
	rExitReason             // ExitReasonOOM
	rErrorCode              // ErrorCode.Valid
	rData                   // base64, 1..MaxData bytes decoded
	rEncList                // comma-separated encoding names
	rEnc                    // EncS2
	rArgs                   // request.arguments
	rEnv                    // request.environment
	rObject                 // nested object described by sub
	rBool                   // true or false; *bool, present when true
)

// field describes one member of an object.
type field struct {
	name     string
	rule     rule
	req      bool
	min, max int64   // rInt bounds
	sub      *schema // rObject
}

// schema describes one frame (typ != 0, fields[0] is "type") or one nested
// object (typ == 0).
type schema struct {
	name   string // wire type name, or the field name of a nested object
	typ    Type
	fields []field
}

// fielder is implemented by the frame structs and the nested structs:
// field(i) returns a pointer to the value of field i of its schema
// (nil for the type member).
type fielder interface {
	field(i int) any
}

func offset(name string) field { return field{name: name, rule: rInt, req: true, max: math.MaxInt64} }

func intIn(name string, req bool, lo, hi int64) field {
	return field{name: name, rule: rInt, req: req, min: lo, max: hi}
}

func boolean(name string) field { return field{name: name, rule: rBool} }

func str(name string, r rule, req bool) field { return field{name: name, rule: r, req: req} }

func object(name string, sub *schema, req bool) field {
	return field{name: name, rule: rObject, req: req, sub: sub}
}

var typeField = field{name: "type", rule: rType, req: true}

func frame(t Type, fields ...field) *schema {
	return &schema{name: t.String(), typ: t, fields: append([]field{typeField}, fields...)}
}

// maxDepth is the deepest nesting of any frame: the frame, then request,
// evidence or gap, then arguments or environment. A decoder refuses deeper
// nesting as syntax without looking further.
const maxDepth = 3

// Window bounds of open (PROTOCOL.md §3).
const (
	MinWindow = 1 << 10
	MaxWindow = 1 << 30
)

var (
	limitsSchema = &schema{name: "limits", fields: []field{
		intIn("pids", false, 1, math.MaxInt64),
		intIn("memory", false, 1, math.MaxInt64),
		intIn("cpu_millicores", false, 1, math.MaxInt64),
	}}
	gapSchema = &schema{name: "gap", fields: []field{
		offset("requested"),
		offset("oldest"),
	}}
	requestSchema = &schema{name: "request", fields: []field{
		str("executable", rText, true),
		{name: "arguments", rule: rArgs, req: true},
		str("working_directory", rPath, true),
		{name: "environment", rule: rEnv, req: true},
	}}
	ttySchema = &schema{name: "tty", fields: []field{
		intIn("rows", true, 1, MaxTTYSize),
		intIn("cols", true, 1, MaxTTYSize),
		str("term", rText, false),
		intIn("xpixel", false, 0, MaxTTYSize),
		intIn("ypixel", false, 0, MaxTTYSize),
	}}
	evidenceSchema = &schema{name: "evidence", fields: []field{
		str("wire_revision", rWire, true),
		str("provider", rText, true),
		str("provider_revision", rText, true),
		str("instance_id", rInstanceID, true),
		str("process_id", rProcessID, true),
		str("executable", rText, true),
		str("working_directory", rPath, true),
		str("arguments_digest", rDigest, true),
		str("started_at", rTime, true),
		object("limits", limitsSchema, false),
	}}
)

// Field indexes that the cross-field rules refer to.
const (
	exitCode, exitSignal        = 1, 2
	destroyProcess, destroyTok  = 1, 2
	destroyInstance, destroyKey = 3, 4
)

// schemas holds every frame's table, indexed by Type.
var schemas = [...]*schema{
	TypeOpen: frame(TypeOpen,
		str("instance_id", rInstanceID, true),
		object("request", requestSchema, true),
		intIn("stdout_window", false, MinWindow, MaxWindow),
		intIn("stdin_window", false, MinWindow, MaxWindow),
		str("open_key", rToken, false),
		str("output_enc", rEncList, false),
		str("stdin_enc", rEncList, false),
		boolean("pings"),
		str("exit_reasons", rEncList, false),
		object("limits", limitsSchema, false),
		object("tty", ttySchema, false)),
	TypeResume: frame(TypeResume,
		str("process_id", rProcessID, true),
		str("token", rToken, true),
		offset("stdout_received"),
		intIn("stderr_received", false, 0, math.MaxInt64),
		boolean("pings")),
	TypeStdin:      frame(TypeStdin, offset("off"), field{name: "data", rule: rData, req: true}, str("enc", rEnc, false)),
	TypeStdinClose: frame(TypeStdinClose, offset("off")),
	TypeAck:        frame(TypeAck, offset("stdout")),
	TypeSignal: frame(TypeSignal,
		intIn("id", true, 1, math.MaxInt64),
		str("signal", rSignal, true)),
	TypeDestroy: frame(TypeDestroy,
		str("process_id", rProcessID, false),
		str("token", rToken, false),
		str("instance_id", rInstanceID, false),
		str("open_key", rToken, false)),
	TypeOpened: frame(TypeOpened,
		str("process_id", rProcessID, true),
		str("token", rToken, true),
		object("evidence", evidenceSchema, true),
		offset("stdin_limit"),
		intIn("stdout_window", true, 1, math.MaxInt64),
		intIn("stderr_window", true, 1, math.MaxInt64),
		offset("grace_ms"),
		offset("heartbeat_ms"),
		offset("exit_wait_ms"),
		intIn("max_data", true, 1, MaxData),
		str("output_enc", rEnc, false),
		str("stdin_enc", rEnc, false),
		boolean("pings"),
		boolean("tty")),
	TypeResumed: frame(TypeResumed,
		str("process_id", rProcessID, true),
		object("evidence", evidenceSchema, true),
		offset("stdin_received"),
		offset("stdin_limit"),
		boolean("pings"),
		boolean("tty")),
	TypeCredit:    frame(TypeCredit, offset("stdin_received"), offset("stdin_limit")),
	TypeStdout:    frame(TypeStdout, offset("off"), field{name: "data", rule: rData, req: true}, str("enc", rEnc, false)),
	TypeStdoutEOF: frame(TypeStdoutEOF, offset("off")),
	TypeStderr:    frame(TypeStderr, offset("off"), field{name: "data", rule: rData, req: true}, str("enc", rEnc, false)),
	TypeExit: frame(TypeExit,
		intIn("code", false, 0, 255),
		str("signal", rExitSignal, false),
		str("reason", rExitReason, false)),
	TypeSignaled: frame(TypeSignaled,
		intIn("id", true, 1, math.MaxInt64),
		str("result", rResult, true)),
	TypeDestroyed: frame(TypeDestroyed, str("process_id", rProcessID, true)),
	TypeError: frame(TypeError,
		str("code", rErrorCode, true),
		str("operation", rText, false),
		str("expected", rText, false),
		str("actual", rText, false),
		str("requirement", rText, false),
		str("reason", rText, false),
		str("message", rText, false),
		object("gap", gapSchema, false),
		intIn("id", false, 1, math.MaxInt64)),
	TypePing: frame(TypePing, intIn("id", true, 0, MaxPingID)),
	TypePong: frame(TypePong, intIn("id", true, 0, MaxPingID)),
	TypeResize: frame(TypeResize,
		intIn("rows", true, 1, MaxTTYSize),
		intIn("cols", true, 1, MaxTTYSize),
		intIn("xpixel", false, 0, MaxTTYSize),
		intIn("ypixel", false, 0, MaxTTYSize)),
}

// typeByName maps a wire type name to its Type.
var typeByName = func() map[string]Type {
	m := make(map[string]Type, len(schemas))
	for t, s := range schemas {
		if s != nil {
			m[s.name] = Type(t)
		}
	}
	return m
}()

// ParseType returns the Type whose wire name is name.
func ParseType(name string) (Type, bool) {
	t, ok := typeByName[name]
	return t, ok
}

// index returns the index of the field named exactly key, or -1.
func (s *schema) index(key []byte) int {
	for i := range s.fields {
		if s.fields[i].name == string(key) {
			return i
		}
	}
	return -1
}

// foldIndex returns the index of the field whose name equals key except for
// ASCII letter case, or -1.
func (s *schema) foldIndex(key []byte) int {
	for i := range s.fields {
		if asciiEqualFold(s.fields[i].name, key) {
			return i
		}
	}
	return -1
}

func asciiEqualFold(a string, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// schemaOf returns the table and the field binding of f, or nil for nil or
// a type this package did not define.
func schemaOf(f Frame) (*schema, fielder) {
	if f == nil {
		return nil, nil
	}
	o, ok := f.(fielder)
	t := f.Type()
	if !ok || int(t) >= len(schemas) || schemas[t] == nil {
		return nil, nil
	}
	return schemas[t], o
}

// present reports whether field i of obj is sent: required fields always,
// optional ones when not zero, exit's code unless a signal replaces it.
func (s *schema) present(obj fielder, i int) bool {
	fd := &s.fields[i]
	if s.typ == TypeExit && i == exitCode {
		e := obj.(*Exit)
		return e.Signal == "" || e.Code != 0
	}
	if fd.req {
		return true
	}
	switch p := obj.field(i).(type) {
	case *int64:
		return *p != 0
	case *int:
		return *p != 0
	case *string:
		return *p != ""
	case *bool:
		return *p
	case **Gap:
		return *p != nil
	case **Limits:
		return *p != nil
	case **TTY:
		return *p != nil
	}
	panic("frames: no presence rule for " + fd.name)
}

// onKey applies the cross-field rules met when field i appears, given the
// fields seen before it.
func (s *schema) onKey(seen uint32, i int) *DecodeError {
	if s.typ == TypeExit && (i == exitCode && seen&(1<<exitSignal) != 0 || i == exitSignal && seen&(1<<exitCode) != 0) {
		return &DecodeError{Kind: KindBadExit, Detail: "both code and signal"}
	}
	if s.typ == TypeDestroy {
		byProcess := seen&(1<<destroyProcess|1<<destroyTok) != 0
		byKey := seen&(1<<destroyInstance|1<<destroyKey) != 0
		switch {
		case (i == destroyProcess || i == destroyTok) && byKey:
			return &DecodeError{Kind: KindBadDestroy, Detail: s.fields[i].name + " with instance_id/open_key"}
		case (i == destroyInstance || i == destroyKey) && byProcess:
			return &DecodeError{Kind: KindBadDestroy, Detail: s.fields[i].name + " with process_id/token"}
		}
	}
	return nil
}

// atEnd applies the rules met at the end of an object: first the missing
// required fields in table order, then the frame's cross-field rules.
func (s *schema) atEnd(obj fielder, seen uint32, parent string) *DecodeError {
	for i := range s.fields {
		if s.fields[i].req && seen&(1<<i) == 0 {
			return &DecodeError{Field: join(parent, s.fields[i].name), Kind: KindMissingField}
		}
	}
	missing := func(name, why string) *DecodeError {
		return &DecodeError{Field: name, Kind: KindMissingField, Detail: why}
	}
	switch s.typ {
	case TypeExit:
		if seen&(1<<exitCode|1<<exitSignal) == 0 {
			return &DecodeError{Kind: KindBadExit, Detail: "neither code nor signal"}
		}
	case TypeDestroy:
		p, t := seen&(1<<destroyProcess) != 0, seen&(1<<destroyTok) != 0
		if p && !t {
			return missing("token", "process_id without token")
		}
		if t && !p {
			return missing("process_id", "token without process_id")
		}
		n, k := seen&(1<<destroyInstance) != 0, seen&(1<<destroyKey) != 0
		if n && !k {
			return missing("open_key", "instance_id without open_key")
		}
		if k && !n {
			return missing("instance_id", "open_key without instance_id")
		}
	case TypeError:
		e := obj.(*Error)
		for _, name := range errorRequires(e.Code) {
			if seen&(1<<s.index([]byte(name))) == 0 {
				return missing(name, "required with "+string(e.Code))
			}
		}
	}
	return nil
}

// errorRequires returns the fields an error frame with code c requires
// besides code, in canonical order.
func errorRequires(c ErrorCode) []string {
	switch c {
	case LifecycleConflict:
		return []string{"operation", "actual"}
	case OperationFailed:
		return []string{"operation", "reason"}
	case CapabilityUnavailable:
		return []string{"requirement"}
	}
	return nil
}

// checkString applies a string rule to a value already known to be valid
// UTF-8. Within one value the checks run in a fixed order: nul_byte, then
// out_of_bounds, then the pattern or vocabulary.
func checkString[T ~string | ~[]byte](r rule, s T) (Kind, string) {
	switch r {
	case rText, rPath:
		if indexNul(s) >= 0 {
			return KindNulByte, ""
		}
		if len(s) == 0 || len(s) > MaxStringBytes {
			return KindOutOfBounds, "length outside 1..4096"
		}
		if r == rPath && s[0] != '/' {
			return KindBadValue, "not an absolute path"
		}
	case rInstanceID:
		if !validInstanceID(s) {
			return KindBadValue, "not an instance id"
		}
	case rProcessID:
		if !validProcessID(s) {
			return KindBadValue, "not 32 lowercase hex digits"
		}
	case rToken:
		if !validToken(s) {
			return KindBadValue, "not 64 lowercase hex digits"
		}
	case rDigest:
		if !validDigest(s) {
			return KindBadDigest, ""
		}
	case rTime:
		if _, err := ParseTime(string(s)); err != nil {
			return KindBadTimestamp, ""
		}
	case rWire:
		if string(s) != WireRevision {
			return KindBadValue, "not " + WireRevision
		}
	case rSignal:
		if !SignalName(s).Valid() {
			return KindBadSignal, "not SIGINT, SIGTERM or SIGKILL"
		}
	case rExitSignal:
		if !ExitSignalName(string(s)) {
			return KindBadSignal, ""
		}
	case rResult:
		if string(s) != SignalDelivered && string(s) != SignalAlreadyExited {
			return KindBadValue, "not delivered or already_exited"
		}
	case rExitReason:
		if string(s) != ExitReasonOOM {
			return KindBadValue, "not oom"
		}
	case rErrorCode:
		if !ErrorCode(s).Valid() {
			return KindBadValue, "not an error code"
		}
	case rEncList:
		if !validEncList(s) {
			return KindBadValue, "not a list of encoding names"
		}
	case rEnc:
		if string(s) != EncS2 {
			return KindBadValue, "not s2"
		}
	}
	return "", ""
}

// checkArgument applies the rules of one request argument.
func checkArgument[T ~string | ~[]byte](s T) Kind {
	if indexNul(s) >= 0 {
		return KindNulByte
	}
	if len(s) > MaxArgumentBytes {
		return KindOutOfBounds
	}
	return ""
}

// validUTF8 is utf8.Valid for either representation.
func validUTF8[T ~string | ~[]byte](s T) bool { return utf8.ValidString(string(s)) }

// Field bindings: index i of the schema to the struct field. Index 0 is the
// type member of a frame.

func (f *Open) field(i int) any {
	return [...]any{nil, &f.InstanceID, &f.Request, &f.StdoutWindow, &f.StdinWindow, &f.OpenKey,
		&f.OutputEnc, &f.StdinEnc, &f.Pings, &f.ExitReasons, &f.Limits, &f.TTY}[i]
}
func (f *Resume) field(i int) any {
	return [...]any{nil, &f.ProcessID, &f.Token, &f.StdoutReceived, &f.StderrReceived, &f.Pings}[i]
}
func (f *Stdin) field(i int) any      { return [...]any{nil, &f.Off, &f.Data, &f.Enc}[i] }
func (f *StdinClose) field(i int) any { return [...]any{nil, &f.Off}[i] }
func (f *Ack) field(i int) any        { return [...]any{nil, &f.Stdout}[i] }
func (f *Signal) field(i int) any     { return [...]any{nil, &f.ID, &f.Signal}[i] }
func (f *Destroy) field(i int) any {
	return [...]any{nil, &f.ProcessID, &f.Token, &f.InstanceID, &f.OpenKey}[i]
}
func (f *Opened) field(i int) any {
	return [...]any{nil, &f.ProcessID, &f.Token, &f.Evidence, &f.StdinLimit, &f.StdoutWindow,
		&f.StderrWindow, &f.GraceMS, &f.HeartbeatMS, &f.ExitWaitMS, &f.MaxData, &f.OutputEnc, &f.StdinEnc, &f.Pings, &f.TTY}[i]
}
func (f *Resumed) field(i int) any {
	return [...]any{nil, &f.ProcessID, &f.Evidence, &f.StdinReceived, &f.StdinLimit, &f.Pings, &f.TTY}[i]
}
func (f *Credit) field(i int) any    { return [...]any{nil, &f.StdinReceived, &f.StdinLimit}[i] }
func (f *Stdout) field(i int) any    { return [...]any{nil, &f.Off, &f.Data, &f.Enc}[i] }
func (f *StdoutEOF) field(i int) any { return [...]any{nil, &f.Off}[i] }
func (f *Stderr) field(i int) any    { return [...]any{nil, &f.Off, &f.Data, &f.Enc}[i] }
func (f *Exit) field(i int) any      { return [...]any{nil, &f.Code, &f.Signal, &f.Reason}[i] }
func (f *Signaled) field(i int) any  { return [...]any{nil, &f.ID, &f.Result}[i] }
func (f *Destroyed) field(i int) any { return [...]any{nil, &f.ProcessID}[i] }
func (f *Error) field(i int) any {
	return [...]any{nil, &f.Code, &f.Operation, &f.Expected, &f.Actual, &f.Requirement,
		&f.Reason, &f.Message, &f.Gap, &f.ID}[i]
}
func (r *ProcessRequest) field(i int) any {
	return [...]any{&r.Executable, &r.Arguments, &r.WorkingDirectory, &r.Environment}[i]
}
func (e *Evidence) field(i int) any {
	return [...]any{&e.WireRevision, &e.Provider, &e.ProviderRevision, &e.InstanceID, &e.ProcessID,
		&e.Executable, &e.WorkingDirectory, &e.ArgumentsDigest, &e.StartedAt, &e.Limits}[i]
}
func (f *Ping) field(i int) any { return [...]any{nil, &f.ID}[i] }
func (f *Pong) field(i int) any { return [...]any{nil, &f.ID}[i] }
func (g *Gap) field(i int) any  { return [...]any{&g.Requested, &g.Oldest}[i] }
func (l *Limits) field(i int) any {
	return [...]any{&l.Pids, &l.Memory, &l.CPUMillicores}[i]
}
func (t *TTY) field(i int) any {
	return [...]any{&t.Rows, &t.Cols, &t.Term, &t.XPixel, &t.YPixel}[i]
}
func (f *Resize) field(i int) any { return [...]any{nil, &f.Rows, &f.Cols, &f.XPixel, &f.YPixel}[i] }
