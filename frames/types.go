package frames

// Subprotocol is the WebSocket subprotocol of wire v1.
const Subprotocol = "procwire.v1"

// WireRevision is the revision literal carried in every evidence object.
const WireRevision = "procwire.v1"

// Bounds of wire v1. PROTOCOL.md states each one; a test pins them.
const (
	// MaxData is the largest decoded payload of one stdin, stdout or stderr frame.
	MaxData = 256 << 10
	// MaxLine is the largest frame after the first, in bytes including the '\n'.
	MaxLine = 512 << 10
	// MaxFirstLine is the largest first frame of a connection (open, resume or
	// destroy). It fits the contract's argument bounds (256 arguments of
	// 65,536 bytes, each byte escaped at worst as \u00XX) plus MaxEnvBytes.
	MaxFirstLine = 128 << 20
	// MaxArguments is the contract's bound on the number of arguments.
	MaxArguments = 256
	// MaxArgumentBytes is the contract's bound on one argument, in UTF-8 bytes.
	MaxArgumentBytes = 65536
	// MaxEnvEntries bounds the number of environment variables.
	MaxEnvEntries = 4096
	// MaxEnvBytes bounds the environment's keys and values together, in bytes.
	MaxEnvBytes = 1 << 20
	// MaxStringBytes bounds every other string field (executable, working
	// directory, error messages) in UTF-8 bytes.
	MaxStringBytes = 4096
	// MaxInstanceIDBytes bounds instance_id.
	MaxInstanceIDBytes = 128
)

// Type names a frame. The zero Type is invalid.
type Type uint8

// Frame types. Client to server: Open .. Destroy and Ping. Server to client:
// Opened .. Error and Pong.
const (
	TypeOpen Type = iota + 1
	TypeResume
	TypeStdin
	TypeStdinClose
	TypeAck
	TypeSignal
	TypeDestroy

	TypeOpened
	TypeResumed
	TypeCredit
	TypeStdout
	TypeStdoutEOF
	TypeStderr
	TypeExit
	TypeSignaled
	TypeDestroyed
	TypeError

	// TypePing (C→S) and TypePong (S→C) are the application-level ping of
	// a session whose open or resume negotiated pings (PROTOCOL.md §3).
	TypePing
	TypePong

	// TypeResize (C→S) sets the window size of a session's terminal
	// (PROTOCOL.md §3, "resize").
	TypeResize
)

var typeNames = [...]string{
	TypeOpen:       "open",
	TypeResume:     "resume",
	TypeStdin:      "stdin",
	TypeStdinClose: "stdin_close",
	TypeAck:        "ack",
	TypeSignal:     "signal",
	TypeDestroy:    "destroy",
	TypeOpened:     "opened",
	TypeResumed:    "resumed",
	TypeCredit:     "credit",
	TypeStdout:     "stdout",
	TypeStdoutEOF:  "stdout_eof",
	TypeStderr:     "stderr",
	TypeExit:       "exit",
	TypeSignaled:   "signaled",
	TypeDestroyed:  "destroyed",
	TypeError:      "error",
	TypePing:       "ping",
	TypePong:       "pong",
	TypeResize:     "resize",
}

// String returns the wire name of t, such as "stdout_eof".
func (t Type) String() string {
	if int(t) < len(typeNames) && typeNames[t] != "" {
		return typeNames[t]
	}
	return "invalid"
}

// FromClient reports whether frames of type t travel from client to server.
func (t Type) FromClient() bool {
	return t >= TypeOpen && t <= TypeDestroy || t == TypePing || t == TypeResize
}

// Frame is implemented by a pointer to every frame type.
type Frame interface {
	// Type returns the frame's type.
	Type() Type
}

// ProcessRequest is the contract's SandboxProcessRequest.
type ProcessRequest struct {
	Executable       string
	Arguments        []string
	WorkingDirectory string
	// Environment is the child's entire environment. Encoded as a JSON
	// object with its keys in ascending byte order.
	Environment map[string]string
}

// Open starts a process on an instance. First frame of a connection.
type Open struct {
	InstanceID string
	Request    ProcessRequest
	// StdoutWindow and StdinWindow ask for window sizes in bytes; 0 (absent)
	// takes the server's default. The server may grant less.
	StdoutWindow int64
	StdinWindow  int64
	// OpenKey, when set, makes the open idempotent: 64 lowercase hex digits
	// (256 random bits) chosen by the client and kept secret like a token.
	// An open repeated with the same InstanceID and OpenKey while its process
	// lives answers opened again for that process instead of starting
	// another; a Destroy may name the process by InstanceID and OpenKey.
	// Empty (absent) means an open that is not repeatable.
	OpenKey string
	// OutputEnc lists the payload encodings the client decodes in stdout
	// and stderr frames, comma-separated in order of preference ("s2").
	// Empty (absent): none, every payload travels uncompressed.
	OutputEnc string
	// StdinEnc lists the encodings the client may compress stdin with, in
	// the same form. Empty (absent): none.
	StdinEnc string
	// Pings asks for application-level pings: the server answers every
	// Ping with a Pong. For a peer that cannot see WebSocket pings (a
	// browser). False (absent): none, as before.
	Pings bool
	// ExitReasons lists the exit reasons the client understands, in the
	// same form ("oom"): the server sends exit's Reason only when listed.
	// Empty (absent): none, exit carries code or signal alone.
	ExitReasons string
	// Limits, optional, asks for limits on the process's tree tighter
	// than (or as tight as) the server's; one above the server's, or one
	// the server does not enforce, is refused with
	// SandboxCapabilityUnavailable{requirement: "resources"}. With it,
	// even empty, opened's evidence says the limits in force.
	Limits *Limits
	// TTY, when set, asks for the process to run on a new pseudo-terminal
	// of that size, as its session leader with the terminal as its
	// controlling terminal. Nil (absent): pipes, as before.
	TTY *TTY
}

// Bounds of a terminal's size in open.tty and resize.
const (
	MaxTTYSize   = 65535 // rows, cols, xpixel and ypixel
	MaxTermBytes = MaxStringBytes
)

// TTY is open's request for a terminal.
type TTY struct {
	// Rows and Cols are the window size in characters, 1..65535.
	Rows, Cols int
	// Term becomes the process's TERM unless the request's environment
	// sets TERM. Empty (absent): TERM is what the environment says.
	Term string
	// XPixel and YPixel are the window size in pixels, 0..65535; 0
	// (absent): unknown.
	XPixel, YPixel int
}

// EncS2 names the S2 block encoding (github.com/klauspost/compress/s2) of
// a data frame's payload, the one encoding of this revision.
const EncS2 = "s2"

// Resume re-attaches a detached process. First frame of a connection.
type Resume struct {
	ProcessID string
	Token     string
	// StdoutReceived is the offset of the first stdout byte the client has
	// not received; the server replays from there.
	StdoutReceived int64
	// StderrReceived is the same for stderr (best effort).
	StderrReceived int64
	// Pings asks for application-level pings on this connection, as in
	// Open.
	Pings bool
}

// Stdin carries bytes for the child's stdin at absolute offset Off.
type Stdin struct {
	Off  int64
	Data []byte
	// Enc is the encoding the payload travels in. Data is always the raw
	// bytes: Append compresses them when Enc is EncS2 and that shrinks the
	// frame usefully (otherwise it sends them as they are, without enc), and
	// the Decoder inflates them and sets Enc to how they arrived. Empty: raw.
	Enc string
}

// StdinClose half-closes stdin after the byte at Off-1 (Off is the total).
type StdinClose struct {
	Off int64
}

// Ack acknowledges that the client's reader consumed stdout up to Stdout.
type Ack struct {
	Stdout int64
}

// SignalName is one of the signal names of the contract's vocabulary.
type SignalName string

// The signals a client may send.
const (
	SIGINT  SignalName = "SIGINT"
	SIGTERM SignalName = "SIGTERM"
	SIGKILL SignalName = "SIGKILL"
)

// Signal asks for a signal to the child's process group. ID is chosen by
// the client, strictly increasing per process; a repeated ID is answered
// again but never delivered twice.
type Signal struct {
	ID     int64
	Signal SignalName
}

// Destroy tears the process down. Inside a session every field is empty.
// As the first frame of a connection it names the process by exactly one
// pair: ProcessID and Token, or InstanceID and OpenKey (the key of the open
// that started it, for a client that never received opened). Half a pair
// is a missing_field error, fields of both pairs bad_destroy.
type Destroy struct {
	ProcessID string
	Token     string
	// InstanceID and OpenKey name the process by the open that started it.
	InstanceID string
	OpenKey    string
}

// Evidence is the contract's SandboxProcessEvidence: authored by the server,
// never by workload output.
type Evidence struct {
	WireRevision     string // always WireRevision
	Provider         string
	ProviderRevision string
	InstanceID       string
	ProcessID        string
	Executable       string // as requested
	WorkingDirectory string // as requested
	ArgumentsDigest  string // ArgumentsDigest(request.Arguments)
	StartedAt        string // canonical UTC, see FormatTime
	// Limits are the limits in force for the process's tree; sent only to
	// a client whose open carried limits (possibly empty). Nil: not said.
	Limits *Limits
}

// Limits bound a process's whole tree: in open, the tighter limits a
// client asks for; in evidence, those in force. A zero field is no limit.
type Limits struct {
	Pids          int64 // most tasks (processes and threads)
	Memory        int64 // most memory, in bytes
	CPUMillicores int64 // most CPU time, in thousandths of a core
}

// Opened answers Open.
type Opened struct {
	ProcessID string
	Token     string
	Evidence  Evidence
	// StdinLimit is the first absolute stdin offset the client may not send.
	StdinLimit int64
	// StdoutWindow is the most stdout the server holds unacknowledged.
	StdoutWindow int64
	// StderrWindow is the size of the lossy stderr ring.
	StderrWindow int64
	// GraceMS is how long a detached process waits for a resume.
	GraceMS int64
	// HeartbeatMS is the ping interval; a peer silent for twice that is dead.
	HeartbeatMS int64
	// ExitWaitMS bounds how long an exit waits for stdout_eof.
	ExitWaitMS int64
	// MaxData is the largest payload of one data frame, either direction.
	MaxData int64
	// OutputEnc is the encoding the server may use for stdout and stderr
	// payloads, one of those the open listed; empty (absent): none.
	OutputEnc string
	// StdinEnc is the encoding the client may use for stdin payloads, one
	// of those the open listed; empty (absent): none.
	StdinEnc string
	// Pings says the server answers Ping frames; set only when the open
	// asked for them.
	Pings bool
	// TTY says the process runs on a terminal (the open had a tty).
	TTY bool
}

// Resumed answers Resume; replayed frames follow it.
type Resumed struct {
	ProcessID string
	Evidence  Evidence
	// StdinReceived is how much stdin the server holds; the client re-sends
	// from there.
	StdinReceived int64
	StdinLimit    int64
	// Pings says the server answers Ping frames on this connection; set
	// only when the resume asked for them.
	Pings bool
	// TTY says the process runs on a terminal.
	TTY bool
}

// Credit grants stdin: the server received StdinReceived bytes and the
// client may send up to StdinLimit.
type Credit struct {
	StdinReceived int64
	StdinLimit    int64
}

// Stdout carries child stdout bytes at absolute offset Off.
type Stdout struct {
	Off  int64
	Data []byte
	// Enc is the encoding the payload travels in. Data is always the raw
	// bytes: Append compresses them when Enc is EncS2 and that shrinks the
	// frame usefully (otherwise it sends them as they are, without enc), and
	// the Decoder inflates them and sets Enc to how they arrived. Empty: raw.
	Enc string
}

// StdoutEOF says stdout ended; Off is its total length.
type StdoutEOF struct {
	Off int64
}

// Stderr carries child stderr bytes at absolute offset Off. A jump in Off
// past what the client holds counts bytes the server's ring dropped.
type Stderr struct {
	Off  int64
	Data []byte
	// Enc is the encoding the payload travels in. Data is always the raw
	// bytes: Append compresses them when Enc is EncS2 and that shrinks the
	// frame usefully (otherwise it sends them as they are, without enc), and
	// the Decoder inflates them and sets Enc to how they arrived. Empty: raw.
	Enc string
}

// Exit reports how the process ended: Code 0..255 when Signal is empty,
// otherwise the name of the signal that killed it ("SIGKILL", "SIGSEGV", ...).
type Exit struct {
	Code   int
	Signal string
	// Reason, optional, says why the process ended when the server knows
	// more than the status: ExitReasonOOM.
	Reason string
}

// ExitReasonOOM: the kernel's OOM killer ended the process (its signal is
// SIGKILL), because it reached its memory limit or the machine ran out.
const ExitReasonOOM = "oom"

// Results of a signal frame.
const (
	SignalDelivered     = "delivered"
	SignalAlreadyExited = "already_exited"
)

// Signaled answers Signal with the same ID.
type Signaled struct {
	ID     int64
	Result string // SignalDelivered or SignalAlreadyExited
}

// Destroyed answers Destroy; every repeat settles the same way.
type Destroyed struct {
	ProcessID string
}

// ErrorCode is the contract's closed adapter error vocabulary.
type ErrorCode string

// The closed vocabulary of error frames.
const (
	CapabilityUnavailable ErrorCode = "SandboxCapabilityUnavailable"
	FileTooLarge          ErrorCode = "SandboxFileTooLarge"
	InstanceNotFound      ErrorCode = "SandboxInstanceNotFound"
	LifecycleConflict     ErrorCode = "SandboxLifecycleConflict"
	OperationFailed       ErrorCode = "SandboxOperationFailed"
	OutputLimitExceeded   ErrorCode = "SandboxOutputLimitExceeded"
	SnapshotForbidden     ErrorCode = "SandboxSnapshotForbidden"
	SnapshotNotFound      ErrorCode = "SandboxSnapshotNotFound"
)

// Gap is carried by a replay_gap error: the client asked to resume stdout
// at Requested but the oldest byte still held is at Oldest.
type Gap struct {
	Requested int64
	Oldest    int64
}

// Error is a typed refusal from the closed vocabulary. Which fields are
// present depends on Code; PROTOCOL.md lists them.
type Error struct {
	Code        ErrorCode
	Operation   string
	Expected    string
	Actual      string
	Requirement string
	Reason      string
	Message     string
	Gap         *Gap
	// ID, when not 0, is the id of the signal frame this error answers.
	ID int64
}

// MaxPingID is the largest id of a Ping (2^53-1, exact in every JSON number).
const MaxPingID = 1<<53 - 1

// Ping asks the server for a Pong with the same ID, on a connection whose
// open or resume negotiated pings. A client that cannot see WebSocket pings
// learns from the Pong that the link is alive.
type Ping struct {
	ID int64
}

// Pong answers Ping with its ID.
type Pong struct {
	ID int64
}

// Resize sets the window size of the session's terminal; the kernel
// sends SIGWINCH to the terminal's foreground process group. It is not
// answered. On a session without a terminal it is a protocol error.
type Resize struct {
	Rows, Cols     int // 1..65535
	XPixel, YPixel int // 0..65535, 0 (absent): unknown
}

// Type returns TypeOpen.
func (*Open) Type() Type { return TypeOpen }

// Type returns TypeResume.
func (*Resume) Type() Type { return TypeResume }

// Type returns TypeStdin.
func (*Stdin) Type() Type { return TypeStdin }

// Type returns TypeStdinClose.
func (*StdinClose) Type() Type { return TypeStdinClose }

// Type returns TypeAck.
func (*Ack) Type() Type { return TypeAck }

// Type returns TypeSignal.
func (*Signal) Type() Type { return TypeSignal }

// Type returns TypeDestroy.
func (*Destroy) Type() Type { return TypeDestroy }

// Type returns TypeOpened.
func (*Opened) Type() Type { return TypeOpened }

// Type returns TypeResumed.
func (*Resumed) Type() Type { return TypeResumed }

// Type returns TypeCredit.
func (*Credit) Type() Type { return TypeCredit }

// Type returns TypeStdout.
func (*Stdout) Type() Type { return TypeStdout }

// Type returns TypeStdoutEOF.
func (*StdoutEOF) Type() Type { return TypeStdoutEOF }

// Type returns TypeStderr.
func (*Stderr) Type() Type { return TypeStderr }

// Type returns TypeExit.
func (*Exit) Type() Type { return TypeExit }

// Type returns TypeSignaled.
func (*Signaled) Type() Type { return TypeSignaled }

// Type returns TypeDestroyed.
func (*Destroyed) Type() Type { return TypeDestroyed }

// Type returns TypeError.
func (*Error) Type() Type { return TypeError }

// Type returns TypePing.
func (*Ping) Type() Type { return TypePing }

// Type returns TypePong.
func (*Pong) Type() Type { return TypePong }

// Type returns TypeResize.
func (*Resize) Type() Type { return TypeResize }
