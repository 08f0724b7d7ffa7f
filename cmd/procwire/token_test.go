//go:build linux

package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A token file others may read is refused, and $PROCWIRE_TOKEN is trimmed
// and checked: spaces only, short or with spaces inside is an error, not
// "no token" (issue 23, finding 8).
func TestReadTokenHygiene(t *testing.T) {
	const good = "0123456789abcdef0123"
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		require.NoError(t, os.Chmod(p, mode))
		return p
	}
	private := write("private", good+"\n", 0o600)
	got, err := readToken(private)
	require.NoError(t, err)
	require.Equal(t, good, got)
	for _, mode := range []os.FileMode{0o640, 0o604, 0o644} {
		_, err := readToken(write("open", good, mode))
		require.ErrorIs(t, err, errTokenFileMode, "mode %v", mode)
	}
	_, err = readToken(write("inner", "0123456789 abcdef0123", 0o600))
	require.ErrorIs(t, err, errBadToken)

	for _, tc := range []struct {
		env  string
		want string
		bad  bool
	}{
		{"", "", false},
		{"  " + good + "\n", good, false},
		{"                ", "", true}, // 16 spaces
		{"short-token", "", true},
		{"0123456789\tabcdef0123", "", true},
	} {
		t.Setenv(tokenEnv, tc.env)
		got, err := readToken("")
		if tc.bad {
			require.ErrorIs(t, err, errBadToken, "%q", tc.env)
			continue
		}
		require.NoError(t, err, "%q", tc.env)
		require.Equal(t, tc.want, got)
	}
}

// serve refuses a world-readable token file before it listens.
func TestServeRefusesOpenTokenFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(p, []byte("0123456789abcdef0123"), 0o600))
	require.NoError(t, os.Chmod(p, 0o644))
	r := runBin(t, "", nil, "serve", "--addr", "127.0.0.1:0", "--token-file", p)
	require.Equal(t, 1, r.code, r.stderr)
	require.Equal(t, "procwire serve: --token-file "+p+": readable by group or others (mode -rw-r--r--): chmod 600 it\n", r.stderr)
}
