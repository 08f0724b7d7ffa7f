// Package size parses and formats byte sizes as procwire's command-line
// flags take them: plain bytes ("1048576") or a number with an IEC binary
// unit ("64KiB", "512MiB", "1.5GiB", "4 GiB"). It is the one parser behind
// every size flag of serve, exec and conform.
//
// The units are B, KiB, MiB, GiB, TiB, PiB and EiB, powers of 1024, matched
// without regard to case ("512mib" is 512 MiB). A number may have a decimal
// fraction when, times its unit, it is a whole number of bytes ("1.5GiB"
// is; "1.1KiB" is not). Decimal units (KB, MB, GB, TB) and bare letters
// (K, M, G) are refused: operators and tools disagree on whether "512M" or
// "512MB" means 512×10⁶ or 512×2²⁰ bytes, and a memory bound off by 5% is a
// bound that does not hold. Signs, exponents and underscores are refused.
package size

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
)

// Units are the IEC binary units Parse takes, smallest first.
var units = [...]struct {
	name  string
	bytes int64
}{
	{"B", 1},
	{"KiB", 1 << 10},
	{"MiB", 1 << 20},
	{"GiB", 1 << 30},
	{"TiB", 1 << 40},
	{"PiB", 1 << 50},
	{"EiB", 1 << 60},
}

// ErrSyntax is wrapped by Parse's error for text that is not a size.
var ErrSyntax = errors.New("not a size: want bytes or a number with KiB, MiB, GiB or TiB, such as 512MiB")

// ErrDecimalUnit is wrapped by Parse's error for a decimal or one-letter
// unit (KB, MB, GB, K, M, G, ...), which Parse refuses as ambiguous.
var ErrDecimalUnit = errors.New("ambiguous unit: write a binary unit (KiB, MiB, GiB: powers of 1024) or plain bytes")

// ErrRange is wrapped by Parse's error for a size that is not a whole
// number of bytes or does not fit an int64.
var ErrRange = errors.New("size out of range")

// Parse returns the bytes s names. Leading and trailing spaces, and spaces
// between the number and its unit, are ignored.
func Parse(s string) (int64, error) {
	num, unit := split(strings.TrimSpace(s))
	if !isNumber(num) {
		return 0, fmt.Errorf("%q: %w", s, ErrSyntax)
	}
	mult := int64(1)
	if unit != "" {
		found := false
		for _, u := range units {
			if strings.EqualFold(unit, u.name) {
				mult, found = u.bytes, true
				break
			}
		}
		if !found {
			if isDecimalUnit(unit) {
				return 0, fmt.Errorf("%q: %w", s, ErrDecimalUnit)
			}
			return 0, fmt.Errorf("%q: %w", s, ErrSyntax)
		}
	}
	if !strings.Contains(num, ".") {
		// The common case, without big numbers.
		var n int64
		for _, c := range []byte(num) {
			if n > (math.MaxInt64-int64(c-'0'))/10 {
				return 0, fmt.Errorf("%q: %w: above %d bytes", s, ErrRange, int64(math.MaxInt64))
			}
			n = n*10 + int64(c-'0')
		}
		if n > math.MaxInt64/mult {
			return 0, fmt.Errorf("%q: %w: above %d bytes", s, ErrRange, int64(math.MaxInt64))
		}
		return n * mult, nil
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Errorf("%q: %w", s, ErrSyntax)
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	if !r.IsInt() {
		return 0, fmt.Errorf("%q: %w: not a whole number of bytes", s, ErrRange)
	}
	if !r.Num().IsInt64() {
		return 0, fmt.Errorf("%q: %w: above %d bytes", s, ErrRange, int64(math.MaxInt64))
	}
	return r.Num().Int64(), nil
}

// split cuts s into its number (digits and dots) and its unit (the rest,
// spaces before it dropped).
func split(s string) (num, unit string) {
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	return s[:i], strings.TrimLeft(s[i:], " \t")
}

// isNumber reports whether s is digits, optionally a dot and more digits.
func isNumber(s string) bool {
	whole, frac, dot := strings.Cut(s, ".")
	if whole == "" || dot && frac == "" {
		return false
	}
	for _, part := range []string{whole, frac} {
		for _, c := range []byte(part) {
			if c < '0' || c > '9' {
				return false
			}
		}
	}
	return true
}

// isDecimalUnit reports whether unit is one Parse refuses as ambiguous:
// a decimal SI unit (KB, MB, ...) or a lone prefix letter (K, M, ...).
func isDecimalUnit(unit string) bool {
	u := strings.ToUpper(unit)
	u = strings.TrimSuffix(u, "B")
	return len(u) == 1 && strings.ContainsAny(u, "KMGTPE")
}

// Format returns n in the largest binary unit that divides it exactly
// ("512MiB", "1536KiB"), or in bytes ("1000"). Parse(Format(n)) is n for
// every n ≥ 0.
func Format(n int64) string {
	if n <= 0 {
		return fmt.Sprint(n)
	}
	for i := len(units) - 1; i > 0; i-- {
		if n%units[i].bytes == 0 {
			return fmt.Sprintf("%d%s", n/units[i].bytes, units[i].name)
		}
	}
	return fmt.Sprint(n)
}
