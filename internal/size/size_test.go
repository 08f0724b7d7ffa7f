package size

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]int64{
		"0":                   0,
		"1":                   1,
		"536870912":           512 << 20,
		"512MiB":              512 << 20,
		"512mib":              512 << 20,
		"512 MiB":             512 << 20,
		" 4GiB ":              4 << 30,
		"64KiB":               64 << 10,
		"64kib":               64 << 10,
		"1.5GiB":              3 << 29,
		"0.5KiB":              512,
		"1024B":               1024,
		"2TiB":                2 << 40,
		"1PiB":                1 << 50,
		"7EiB":                7 << 60,
		"9223372036854775807": math.MaxInt64,
		"007":                 7,
		"1.000KiB":            1024,
	} {
		got, err := Parse(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for in, want := range map[string]error{
		"":                              ErrSyntax,
		"MiB":                           ErrSyntax,
		"-1":                            ErrSyntax,
		"+1":                            ErrSyntax,
		"1e3":                           ErrSyntax,
		"1_000":                         ErrSyntax,
		".5KiB":                         ErrSyntax,
		"5.KiB":                         ErrSyntax,
		"1.2.3":                         ErrSyntax,
		"12 34":                         ErrSyntax,
		"1/2":                           ErrSyntax,
		"5 Mib x":                       ErrSyntax,
		"5XiB":                          ErrSyntax,
		"0x10":                          ErrSyntax,
		"512MB":                         ErrDecimalUnit,
		"512mb":                         ErrDecimalUnit,
		"512M":                          ErrDecimalUnit,
		"4G":                            ErrDecimalUnit,
		"64KB":                          ErrDecimalUnit,
		"64k":                           ErrDecimalUnit,
		"1TB":                           ErrDecimalUnit,
		"1.1KiB":                        ErrRange,
		"0.3B":                          ErrRange,
		"8EiB":                          ErrRange,
		"9223372036854775808":           ErrRange,
		"99999999999999999999999999999": ErrRange,
		"8388608TiB":                    ErrRange,
		"8191.9999PiB":                  ErrRange, // not whole
	} {
		_, err := Parse(in)
		require.Error(t, err, in)
		require.True(t, errors.Is(err, want), "%q: %v, want %v", in, err, want)
	}
}

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{
		0:             "0",
		1000:          "1000",
		1024:          "1KiB",
		1536:          "1536",
		512 << 20:     "512MiB",
		3 << 29:       "1536MiB",
		4 << 30:       "4GiB",
		math.MaxInt64: "9223372036854775807",
		1 << 62:       "4EiB",
	} {
		require.Equal(t, want, Format(n))
	}
}

// FuzzParse checks that Parse never panics, that what it accepts is a
// non-negative size that Format gives back in a form Parse reads the same,
// and that a plain decimal number is read as bytes.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"0", "512MiB", "1.5GiB", "64 KiB", "512MB", "8EiB", "1.1KiB", " 7 b ", "9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Parse(s)
		if err != nil {
			require.True(t, errors.Is(err, ErrSyntax) || errors.Is(err, ErrDecimalUnit) || errors.Is(err, ErrRange), "%q: %v", s, err)
			return
		}
		require.GreaterOrEqual(t, n, int64(0))
		back, err := Parse(Format(n))
		require.NoError(t, err)
		require.Equal(t, n, back)
	})
}
