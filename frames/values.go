package frames

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"time"
)

// TimeLayout is the canonical timestamp layout: UTC with milliseconds, 24
// characters.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// FormatTime returns t in the canonical form "YYYY-MM-DDTHH:MM:SS.mmmZ",
// in UTC, truncated to the millisecond. t must be within years 0..9999.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

// ParseTime parses a canonical timestamp. It refuses, with a *DecodeError of
// kind bad_timestamp, anything that FormatTime would not produce byte for
// byte: another length, zone, precision or an impossible date.
func ParseTime(s string) (time.Time, error) {
	if len(s) != len(TimeLayout) {
		return time.Time{}, &DecodeError{Kind: KindBadTimestamp, Detail: "not 24 characters"}
	}
	t, err := time.Parse(TimeLayout, s)
	if err != nil || t.Format(TimeLayout) != s {
		return time.Time{}, &DecodeError{Kind: KindBadTimestamp, Detail: "not canonical UTC with milliseconds"}
	}
	return t, nil
}

// ArgumentsDigest returns the evidence digest of a request's arguments
// (PROTOCOL.md §6): "sha256:" and the hex SHA-256 of the argument count as
// 4 bytes big-endian, then per argument its length as 4 bytes big-endian
// and its bytes.
func ArgumentsDigest(args []string) string {
	h := sha256.New()
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(args)))
	h.Write(n[:])
	for _, a := range args {
		binary.BigEndian.PutUint32(n[:], uint32(len(a)))
		h.Write(n[:])
		h.Write([]byte(a))
	}
	var sum [sha256.Size]byte
	return "sha256:" + hex.EncodeToString(h.Sum(sum[:0]))
}

// Valid reports whether s is a signal a client may send: SIGINT, SIGTERM
// or SIGKILL.
func (s SignalName) Valid() bool { return s == SIGINT || s == SIGTERM || s == SIGKILL }

// Valid reports whether c is in the closed vocabulary of error codes.
func (c ErrorCode) Valid() bool {
	switch c {
	case CapabilityUnavailable, FileTooLarge, InstanceNotFound, LifecycleConflict,
		OperationFailed, OutputLimitExceeded, SnapshotForbidden, SnapshotNotFound:
		return true
	}
	return false
}

// exitSignals are the Linux signal names an exit frame may carry, besides
// SIGRTMIN+n.
var exitSignals = map[string]bool{
	"SIGHUP": true, "SIGINT": true, "SIGQUIT": true, "SIGILL": true, "SIGTRAP": true,
	"SIGABRT": true, "SIGBUS": true, "SIGFPE": true, "SIGKILL": true, "SIGUSR1": true,
	"SIGSEGV": true, "SIGUSR2": true, "SIGPIPE": true, "SIGALRM": true, "SIGTERM": true,
	"SIGSTKFLT": true, "SIGCHLD": true, "SIGCONT": true, "SIGSTOP": true, "SIGTSTP": true,
	"SIGTTIN": true, "SIGTTOU": true, "SIGURG": true, "SIGXCPU": true, "SIGXFSZ": true,
	"SIGVTALRM": true, "SIGPROF": true, "SIGWINCH": true, "SIGIO": true, "SIGPWR": true,
	"SIGSYS": true,
}

// ExitSignalName reports whether name may be the signal of an exit frame: a
// Linux signal name such as "SIGSEGV", or "SIGRTMIN+n" with n in 0..32
// (kernel signals 32..64) written in shortest decimal form.
func ExitSignalName(name string) bool {
	if exitSignals[name] {
		return true
	}
	const rt = "SIGRTMIN+"
	if len(name) <= len(rt) || len(name) > len(rt)+2 || name[:len(rt)] != rt {
		return false
	}
	d := name[len(rt):]
	if len(d) > 1 && d[0] == '0' {
		return false
	}
	n, err := strconv.Atoi(d)
	return err == nil && n >= 0 && n <= 32 && d[0] != '+' && d[0] != '-'
}

// validInstanceID reports whether s matches ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$.
func validInstanceID[T ~string | ~[]byte](s T) bool {
	if len(s) == 0 || len(s) > MaxInstanceIDBytes || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '.' && c != '_' && c != ':' && c != '-' {
			return false
		}
	}
	return true
}

// validProcessID reports whether s is 32 lowercase hex digits.
func validProcessID[T ~string | ~[]byte](s T) bool { return isLowerHex(s, 32) }

// validToken reports whether s is 64 lowercase hex digits.
func validToken[T ~string | ~[]byte](s T) bool { return isLowerHex(s, 64) }

// validDigest reports whether s matches ^sha256:[0-9a-f]{64}$.
func validDigest[T ~string | ~[]byte](s T) bool {
	const p = "sha256:"
	return len(s) == len(p)+64 && string(s[:len(p)]) == p && isLowerHex(s[len(p):], 64)
}

// validEnvKey reports whether s matches ^[A-Za-z_][A-Za-z0-9_]*$.
func validEnvKey[T ~string | ~[]byte](s T) bool {
	if len(s) == 0 || isDigit(s[0]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '_' {
			return false
		}
	}
	return true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isAlnum(c byte) bool {
	return isDigit(c) || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isLowerHex[T ~string | ~[]byte](s T, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isDigit(c) && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// indexNul returns the index of the first NUL in s, or -1.
func indexNul[T ~string | ~[]byte](s T) int {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return i
		}
	}
	return -1
}

// ValidInstanceID reports whether s is a valid instance_id:
// ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$.
func ValidInstanceID(s string) bool { return validInstanceID(s) }

// ValidProcessID reports whether s is a valid process_id: 32 lowercase hex digits.
func ValidProcessID(s string) bool { return validProcessID(s) }

// ValidToken reports whether s is a valid resume token: 64 lowercase hex digits.
func ValidToken(s string) bool { return validToken(s) }

// ValidDigest reports whether s matches ^sha256:[0-9a-f]{64}$.
func ValidDigest(s string) bool { return validDigest(s) }

// ValidEnvKey reports whether s is a valid environment key: ^[A-Za-z_][A-Za-z0-9_]*$.
func ValidEnvKey(s string) bool { return validEnvKey(s) }
