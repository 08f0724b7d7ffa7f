package frames

import (
	"bytes"
	"maps"
	"slices"
	"strconv"
)

// Validate checks a frame built in Go against the rules the decoder
// applies, and returns the same *DecodeError that decoding Append(nil, f)
// would: the first rule broken in canonical order. It returns nil for a
// valid frame. A nil frame, or one of a type this package did not define,
// is refused as unknown_type.
//
// Absent optional fields are the zero values: an Open with StdoutWindow 0
// asks for the default window, an Error with an empty Reason has none.
func Validate(f Frame) error {
	s, obj := schemaOf(f)
	if s == nil {
		return &DecodeError{Field: "type", Kind: KindUnknownType, Detail: "not a frame of this package"}
	}
	if err := validateObject(s, obj, ""); err != nil {
		err.Frame = s.name
		return err
	}
	return nil
}

func validateObject(s *schema, obj fielder, parent string) *DecodeError {
	var seen uint32
	for i := range s.fields {
		fd := &s.fields[i]
		if fd.rule == rType {
			seen |= 1
			continue
		}
		if !s.present(obj, i) {
			continue
		}
		if err := s.onKey(seen, i); err != nil {
			return err
		}
		seen |= 1 << i
		if err := validateValue(fd, obj.field(i), parent); err != nil {
			return err
		}
	}
	return s.atEnd(obj, seen, parent)
}

func validateValue(fd *field, p any, parent string) *DecodeError {
	path := join(parent, fd.name)
	fail := func(k Kind, detail string) *DecodeError {
		return &DecodeError{Field: path, Kind: k, Detail: detail}
	}
	badUTF8 := func(what string) *DecodeError {
		// The decoder sees invalid UTF-8 as a syntax error of the line.
		return &DecodeError{Kind: KindSyntax, Detail: "invalid UTF-8 in " + what}
	}
	checkInt := func(v int64) *DecodeError {
		switch {
		case v < 0:
			return fail(KindBadInteger, "negative")
		case v < fd.min || v > fd.max:
			return fail(KindOutOfBounds, strconv.FormatInt(v, 10)+" outside "+
				strconv.FormatInt(fd.min, 10)+".."+strconv.FormatInt(fd.max, 10))
		}
		return nil
	}
	checkStr := func(v string) *DecodeError {
		if !validUTF8(v) {
			return badUTF8(path)
		}
		if k, detail := checkString(fd.rule, v); k != "" {
			return fail(k, detail)
		}
		return nil
	}
	switch p := p.(type) {
	case *int64:
		return checkInt(*p)
	case *int:
		return checkInt(int64(*p))
	case *string:
		return checkStr(*p)
	case *bool:
		return nil
	case *SignalName:
		return checkStr(string(*p))
	case *ErrorCode:
		return checkStr(string(*p))
	case *[]byte:
		if len(*p) == 0 || len(*p) > MaxData {
			return fail(KindOutOfBounds, "data of "+strconv.Itoa(len(*p))+" bytes")
		}
		return nil
	case *[]string:
		for i, a := range *p {
			if i == MaxArguments {
				return fail(KindOutOfBounds, "more than "+strconv.Itoa(MaxArguments)+" arguments")
			}
			if !validUTF8(a) {
				return badUTF8(path)
			}
			if k := checkArgument(a); k != "" {
				return fail(k, "argument "+strconv.Itoa(i))
			}
		}
		return nil
	case *map[string]string:
		total := 0
		for i, k := range slices.Sorted(maps.Keys(*p)) {
			v := (*p)[k]
			switch {
			case i == MaxEnvEntries:
				return fail(KindOutOfBounds, "more than "+strconv.Itoa(MaxEnvEntries)+" entries")
			case !validUTF8(k):
				return badUTF8(path)
			case !validEnvKey(k):
				return fail(KindBadEnvKey, "key "+strconv.Quote(k))
			case !validUTF8(v):
				return badUTF8(path)
			case indexNul(v) >= 0:
				return fail(KindNulByte, "value of "+strconv.Quote(k))
			}
			total += len(k) + len(v)
			if total > MaxEnvBytes {
				return fail(KindOutOfBounds, "more than "+strconv.Itoa(MaxEnvBytes)+" bytes")
			}
		}
		return nil
	case **Gap:
		return validateObject(fd.sub, *p, path)
	case **Limits:
		return validateObject(fd.sub, *p, path)
	case **TTY:
		return validateObject(fd.sub, *p, path)
	case fielder:
		return validateObject(fd.sub, p, path)
	}
	panic("frames: no rule for " + fd.name)
}

// Equal reports whether a and b are frames of the same type with equal
// fields. A nil and an empty Data, Arguments or Environment are equal, as
// they encode the same way. A data frame's Enc is not compared: Data is the
// raw payload however it travelled.
func Equal(a, b Frame) bool {
	sa, oa := schemaOf(a)
	sb, ob := schemaOf(b)
	if sa == nil || sb == nil {
		return sa == nil && sb == nil && a == nil && b == nil
	}
	return sa == sb && equalObject(sa, oa, ob)
}

func equalObject(s *schema, a, b fielder) bool {
	for i := range s.fields {
		if s.fields[i].rule == rType || s.fields[i].name == "enc" {
			continue // a data frame's payload is compared raw, however it travelled
		}
		if !equalValue(s.fields[i].sub, a.field(i), b.field(i)) {
			return false
		}
	}
	return true
}

func equalValue(sub *schema, a, b any) bool {
	switch a := a.(type) {
	case *int64:
		return *a == *b.(*int64)
	case *int:
		return *a == *b.(*int)
	case *string:
		return *a == *b.(*string)
	case *bool:
		return *a == *b.(*bool)
	case *SignalName:
		return *a == *b.(*SignalName)
	case *ErrorCode:
		return *a == *b.(*ErrorCode)
	case *[]byte:
		return bytes.Equal(*a, *b.(*[]byte))
	case *[]string:
		return slices.Equal(*a, *b.(*[]string))
	case *map[string]string:
		return maps.Equal(*a, *b.(*map[string]string))
	case **Gap:
		gb := *b.(**Gap)
		if *a == nil || gb == nil {
			return *a == nil && gb == nil
		}
		return equalObject(sub, *a, gb)
	case **Limits:
		lb := *b.(**Limits)
		if *a == nil || lb == nil {
			return *a == nil && lb == nil
		}
		return equalObject(sub, *a, lb)
	case **TTY:
		tb := *b.(**TTY)
		if *a == nil || tb == nil {
			return *a == nil && tb == nil
		}
		return equalObject(sub, *a, tb)
	case fielder:
		return equalObject(sub, a, b.(fielder))
	}
	panic("frames: no equality for field")
}
