package frames

import (
	"unicode/utf8"
)

// Kind classifies a refused frame. The values are the error kinds of
// PROTOCOL.md §8, spelled as there.
type Kind string

// The decode error kinds of PROTOCOL.md §8.
const (
	KindLineTooLong    Kind = "line_too_long"    // the line exceeds its limit
	KindSyntax         Kind = "syntax"           // not one JSON object, malformed JSON, bad UTF-8, lone surrogate, nesting too deep
	KindTrailingData   Kind = "trailing_data"    // anything after the object but one '\n'
	KindDuplicateKey   Kind = "duplicate_key"    // a key repeated in one object
	KindCaseVariantKey Kind = "case_variant_key" // a key equal to a known field except for ASCII letter case
	KindUnknownType    Kind = "unknown_type"     // type names no v1 frame
	KindMissingField   Kind = "missing_field"    // a required field (including type) is absent
	KindUnknownField   Kind = "unknown_field"    // a key the frame does not have
	KindWrongType      Kind = "wrong_type"       // a value of the wrong JSON type, null included
	KindBadInteger     Kind = "bad_integer"      // negative, fractional, exponent or overflowing integer
	KindBadBase64      Kind = "bad_base64"       // data is not padded standard base64
	KindOutOfBounds    Kind = "out_of_bounds"    // a size, count or number outside its bound
	KindNulByte        Kind = "nul_byte"         // a NUL in a string
	KindBadEnvKey      Kind = "bad_env_key"      // an environment key not matching ^[A-Za-z_][A-Za-z0-9_]*$
	KindBadSignal      Kind = "bad_signal"       // a signal name outside its frame's vocabulary
	KindBadExit        Kind = "bad_exit"         // exit with both or neither of code and signal
	KindBadDestroy     Kind = "bad_destroy"      // destroy naming its process by both process_id/token and instance_id/open_key
	KindBadTimestamp   Kind = "bad_timestamp"    // not canonical UTC ISO-8601 with milliseconds
	KindBadDigest      Kind = "bad_digest"       // not sha256: and 64 lowercase hex digits
	KindBadValue       Kind = "bad_value"        // a value outside its vocabulary or pattern
	KindBadPayload     Kind = "bad_payload"      // a compressed payload that does not inflate to 1..max_data bytes
)

// Kinds returns every decode error kind, in the order of PROTOCOL.md §8.
func Kinds() []Kind {
	return []Kind{
		KindLineTooLong, KindSyntax, KindTrailingData, KindDuplicateKey,
		KindCaseVariantKey, KindUnknownType, KindMissingField, KindUnknownField,
		KindWrongType, KindBadInteger, KindBadBase64, KindOutOfBounds,
		KindNulByte, KindBadEnvKey, KindBadSignal, KindBadExit, KindBadDestroy,
		KindBadTimestamp, KindBadDigest, KindBadValue, KindBadPayload,
	}
}

// DecodeError is a refused frame: the frame type, the field and the rule
// broken. The decoder, Validate, Reader and ParseTime return it.
//
// Compare with errors.Is against the sentinels (ErrSyntax, ErrDuplicateKey,
// ...), which are *DecodeError values with only Kind set; errors.Is also
// accepts a *DecodeError target with Frame and/or Field set, matching those
// too. Never compare Error() strings.
type DecodeError struct {
	// Frame is the wire type name ("stdout"), or "" when the type is not
	// known: the line is too long, the type is missing, unknown, or a syntax
	// error comes before it.
	Frame string
	// Field is the dotted path of the offending field ("off",
	// "request.arguments", "evidence.started_at"), or "" for the whole line
	// (syntax, trailing_data, line_too_long) or frame (bad_exit, bad_destroy). For an
	// unknown, case-variant or repeated key it is the path of that key as
	// sent. Entries of request.arguments and request.environment are
	// reported as the collection; Detail names the index or key.
	Field string
	// Kind is the rule broken.
	Kind Kind
	// Detail is free text for people; it is not part of the contract.
	Detail string
}

// maxReason is the longest WebSocket close reason (RFC 6455 §5.5).
const maxReason = 123

// Error reads "<frame>.<field>: <kind>[: detail]" (the frame and field
// parts left out when empty). It is at most 123 bytes of valid UTF-8, so it
// fits a WebSocket close reason; a long field or detail is cut.
func (e *DecodeError) Error() string {
	b := make([]byte, 0, maxReason)
	b = appendClean(b, e.Frame, 40)
	if e.Field != "" {
		if e.Frame != "" {
			b = append(b, '.')
		}
		b = appendClean(b, e.Field, 40)
	}
	if len(b) > 0 {
		b = append(b, ": "...)
	}
	b = append(b, e.Kind...)
	if e.Detail != "" && len(b)+3 < maxReason {
		b = append(b, ": "...)
		b = appendClean(b, e.Detail, maxReason-len(b))
	}
	return string(b)
}

// appendClean appends at most n bytes of s, cut at a rune boundary, with
// control characters and invalid UTF-8 shown as '?'.
func appendClean(b []byte, s string, n int) []byte {
	start := len(b)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r < 0x20 || r == 0x7f {
			r, size = '?', 1
		}
		if len(b)-start+utf8.RuneLen(r) > n {
			break
		}
		b = utf8.AppendRune(b, r)
		i += size
	}
	return b
}

// Is reports whether target is a *DecodeError of the same Kind whose Frame
// and Field, where set, are equal to e's. So errors.Is(err, ErrSyntax)
// matches any syntax error, and errors.Is(err, &DecodeError{Frame: "open",
// Field: "request.arguments", Kind: KindOutOfBounds}) a precise one.
func (e *DecodeError) Is(target error) bool {
	t, ok := target.(*DecodeError)
	return ok && t.Kind == e.Kind &&
		(t.Frame == "" || t.Frame == e.Frame) &&
		(t.Field == "" || t.Field == e.Field)
}

// Sentinels, one per Kind, for errors.Is. Do not modify them.
var (
	ErrLineTooLong    = &DecodeError{Kind: KindLineTooLong}
	ErrSyntax         = &DecodeError{Kind: KindSyntax}
	ErrTrailingData   = &DecodeError{Kind: KindTrailingData}
	ErrDuplicateKey   = &DecodeError{Kind: KindDuplicateKey}
	ErrCaseVariantKey = &DecodeError{Kind: KindCaseVariantKey}
	ErrUnknownType    = &DecodeError{Kind: KindUnknownType}
	ErrMissingField   = &DecodeError{Kind: KindMissingField}
	ErrUnknownField   = &DecodeError{Kind: KindUnknownField}
	ErrWrongType      = &DecodeError{Kind: KindWrongType}
	ErrBadInteger     = &DecodeError{Kind: KindBadInteger}
	ErrBadBase64      = &DecodeError{Kind: KindBadBase64}
	ErrOutOfBounds    = &DecodeError{Kind: KindOutOfBounds}
	ErrNulByte        = &DecodeError{Kind: KindNulByte}
	ErrBadEnvKey      = &DecodeError{Kind: KindBadEnvKey}
	ErrBadSignal      = &DecodeError{Kind: KindBadSignal}
	ErrBadExit        = &DecodeError{Kind: KindBadExit}
	ErrBadDestroy     = &DecodeError{Kind: KindBadDestroy}
	ErrBadTimestamp   = &DecodeError{Kind: KindBadTimestamp}
	ErrBadDigest      = &DecodeError{Kind: KindBadDigest}
	ErrBadValue       = &DecodeError{Kind: KindBadValue}
	ErrBadPayload     = &DecodeError{Kind: KindBadPayload}
)

// join returns the dotted path parent.name without allocating when parent
// is empty (every path on the success path is).
func join(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}
