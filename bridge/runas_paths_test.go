//go:build linux

package bridge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/proc"
)

// Under RunAs, the checks before the start (made by the server, as root)
// tell the client no more than the user could find out itself: behind a
// directory the user cannot search, a file that exists, one that does
// not, and a directory all get the same answer (issue 23, finding 8:
// "not executable: mode -rw-r--r--" for /root/.bashrc).
func TestRunAsPathChecksRevealNothingTheUserCannotSee(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the checks as another user matter for a root server: needs root")
	}
	top := t.TempDir()
	require.NoError(t, os.Chmod(top, 0o755))
	require.NoError(t, os.Chmod(filepath.Dir(top), 0o755)) // t.TempDir's own, 0700
	private := filepath.Join(top, "private")
	require.NoError(t, os.Mkdir(private, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(private, "dotfile"), []byte("secret\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(private, "tool"), []byte("#!/bin/sh\n"), 0o755))
	require.NoError(t, os.Mkdir(filepath.Join(private, "dir"), 0o755))
	nobody := &proc.User{UID: 65534, GID: 65534}

	answer := func(exe string, as *proc.User) (string, string) {
		_, err := resolveExecutable(&proc.Request{Executable: exe, WorkingDirectory: "/"}, as)
		require.Error(t, err)
		se := err.(*proc.StartError)
		return se.Reason, strings.ReplaceAll(err.Error(), exe, "PATH")
	}
	var reasons, messages []string
	for _, name := range []string{"dotfile", "missing", "tool", "dir"} {
		r, m := answer(filepath.Join(private, name), nobody)
		reasons, messages = append(reasons, r), append(messages, m)
	}
	for i := range reasons {
		require.Equal(t, reasons[0], reasons[i], "%v", messages)
		require.Equal(t, messages[0], messages[i])
	}
	require.Equal(t, proc.ReasonPermissionDenied, reasons[0])

	// Looked up in a PATH the user cannot search: not found or denied,
	// the same either way.
	_, err := resolveExecutable(&proc.Request{Executable: "tool", WorkingDirectory: "/", Environment: map[string]string{"PATH": private}}, nobody)
	r1, m1 := err.(*proc.StartError).Reason, strings.ReplaceAll(err.Error(), "tool", "X")
	_, err = resolveExecutable(&proc.Request{Executable: "none", WorkingDirectory: "/", Environment: map[string]string{"PATH": private}}, nobody)
	r2, m2 := err.(*proc.StartError).Reason, strings.ReplaceAll(err.Error(), "none", "X")
	require.Equal(t, r1, r2)
	require.Equal(t, m1, m2)

	// A working directory behind it: the same answer for one that exists.
	e1 := checkDir(filepath.Join(private, "dir"), nobody)
	e2 := checkDir(filepath.Join(private, "nodir"), nobody)
	require.Equal(t, e1.Error(), strings.ReplaceAll(e2.Error(), "nodir", "dir"))

	// Root, and the user where it may look, still get the precise answer.
	r, _ := answer(filepath.Join(private, "dotfile"), nil)
	require.Equal(t, proc.ReasonPermissionDenied, r)
	r, _ = answer(filepath.Join(private, "missing"), nil)
	require.Equal(t, proc.ReasonExecutableNotFound, r)
	require.NoError(t, os.Chmod(private, 0o755))
	r, _ = answer(filepath.Join(private, "missing"), nobody)
	require.Equal(t, proc.ReasonExecutableNotFound, r)
	path, err := resolveExecutable(&proc.Request{Executable: filepath.Join(private, "tool"), WorkingDirectory: "/"}, nobody)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(private, "tool"), path)
}
