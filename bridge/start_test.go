//go:build linux

package bridge

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/proc"
)

func TestArgvIsExact(t *testing.T) {
	args := []string{"/proc/self/cmdline", "", "a b", "c'd\"e", "$HOME", "*"}
	// cat also gets the odd arguments as file names and fails on them after
	// printing its own command line, which is all this test reads.
	req := proc.Request{Executable: "cat", Arguments: args, WorkingDirectory: t.TempDir(),
		Environment: map[string]string{"PATH": "/usr/bin:/bin"}}
	out, st := output(t, req, nil)
	require.Equal(t, "cat\x00"+strings.Join(args, "\x00")+"\x00", out)
	require.Equal(t, proc.ExitStatus{Code: 1}, st)
}

func TestArgsEnvAndWorkingDirectory(t *testing.T) {
	t.Setenv("PROCWIRE_SERVER_SECRET", "leak")
	req := shReq(t, `printf "%s\n" "$@"; echo --; env; echo --; pwd`, "one", "two words", "")
	req.Environment["GREETING"] = "hello world"
	req.Environment["EMPTY"] = ""
	out, st := output(t, req, nil)
	require.Equal(t, proc.ExitStatus{}, st)
	parts := strings.Split(out, "--\n")
	require.Len(t, parts, 3)
	require.Equal(t, "one\ntwo words\n\n", parts[0])
	require.Contains(t, parts[1], "GREETING=hello world\n")
	require.Contains(t, parts[1], "EMPTY=\n")
	require.NotContains(t, parts[1], "PROCWIRE_SERVER_SECRET")
	require.Equal(t, req.WorkingDirectory+"\n", parts[2])
}

func TestEnvironmentIsExactlyTheRequest(t *testing.T) {
	t.Setenv("PROCWIRE_SERVER_SECRET", "leak")
	env := map[string]string{"A": "1", "B_2": "x=y", "PATH": "/usr/bin:/bin"}
	out, _ := output(t, proc.Request{Executable: "env", WorkingDirectory: t.TempDir(), Environment: env}, nil)
	var want []string
	for k, v := range env {
		want = append(want, k+"="+v)
	}
	sort.Strings(want)
	require.Equal(t, strings.Join(want, "\n")+"\n", out)

	// An empty environment stays empty: it is not the server's.
	out, _ = output(t, proc.Request{Executable: "/usr/bin/env", WorkingDirectory: t.TempDir()}, nil)
	require.Empty(t, out)
}

// writeScript writes an executable shell script and returns its path.
func writeScript(t *testing.T, dir, name, body string, mode os.FileMode) string {
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte(body), mode))
	return path
}

func TestPathComesFromTheRequest(t *testing.T) {
	mine, servers := t.TempDir(), t.TempDir()
	writeScript(t, mine, "procwire-probe", "#!/bin/sh\necho mine\n", 0o755)
	writeScript(t, servers, "procwire-probe", "#!/bin/sh\necho server\n", 0o755)
	writeScript(t, servers, "procwire-server-only", "#!/bin/sh\necho server\n", 0o755)
	t.Setenv("PATH", servers+":"+os.Getenv("PATH"))

	req := proc.Request{Executable: "procwire-probe", WorkingDirectory: t.TempDir(),
		Environment: map[string]string{"PATH": "/nonexistent:" + mine + ":/usr/bin:/bin"}}
	out, _ := output(t, req, nil)
	require.Equal(t, "mine\n", out)

	req.Executable = "procwire-server-only"
	_, err := Start(req, nil)
	requireReason(t, err, proc.ReasonExecutableNotFound)

	// Without PATH in the request, DefaultPath applies.
	out, _ = output(t, proc.Request{Executable: "sh", Arguments: []string{"-c", "echo $0"},
		WorkingDirectory: t.TempDir()}, nil)
	require.Equal(t, "sh\n", out)

	// A relative PATH entry and a relative executable resolve against the
	// working directory.
	wd := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(wd, "bin"), 0o755))
	writeScript(t, filepath.Join(wd, "bin"), "rel", "#!/bin/sh\necho rel\n", 0o755)
	out, _ = output(t, proc.Request{Executable: "rel", WorkingDirectory: wd,
		Environment: map[string]string{"PATH": "bin"}}, nil)
	require.Equal(t, "rel\n", out)
	out, _ = output(t, proc.Request{Executable: "./bin/rel", WorkingDirectory: wd}, nil)
	require.Equal(t, "rel\n", out)
}

func requireReason(t *testing.T, err error, reason string) {
	t.Helper()
	var se *proc.StartError
	require.True(t, errors.As(err, &se), "want *StartError, got %v", err)
	require.Equal(t, reason, se.Reason, "error: %v", err)
}

func TestStartErrors(t *testing.T) {
	dir := t.TempDir()
	noExec := writeScript(t, dir, "noexec", "#!/bin/sh\n", 0o644)
	garbage := writeScript(t, dir, "garbage", "\x00\x01\x02 not a program\n", 0o755)
	noInterp := writeScript(t, dir, "nointerp", "#!/nonexistent/interpreter\n", 0o755)
	file := writeScript(t, dir, "file", "", 0o644)
	base := proc.Request{Executable: "sh", WorkingDirectory: dir}

	for _, tc := range []struct {
		name   string
		mutate func(r *proc.Request)
		reason string
	}{
		{"missing absolute", func(r *proc.Request) { r.Executable = "/nonexistent/prog" }, proc.ReasonExecutableNotFound},
		{"missing in PATH", func(r *proc.Request) { r.Executable = "procwire-no-such-prog" }, proc.ReasonExecutableNotFound},
		{"empty executable", func(r *proc.Request) { r.Executable = "" }, proc.ReasonExecutableNotFound},
		{"empty PATH", func(r *proc.Request) { r.Environment = map[string]string{"PATH": ""} }, proc.ReasonExecutableNotFound},
		{"not executable", func(r *proc.Request) { r.Executable = noExec }, proc.ReasonPermissionDenied},
		{"not executable in PATH", func(r *proc.Request) {
			r.Executable = "noexec"
			r.Environment = map[string]string{"PATH": dir}
		}, proc.ReasonPermissionDenied},
		{"directory", func(r *proc.Request) { r.Executable = dir }, proc.ReasonPermissionDenied},
		{"missing interpreter", func(r *proc.Request) { r.Executable = noInterp }, proc.ReasonExecutableNotFound},
		{"exec format", func(r *proc.Request) { r.Executable = garbage }, proc.ReasonStartFailed},
		{"missing working directory", func(r *proc.Request) { r.WorkingDirectory = "/nonexistent/dir" }, proc.ReasonWorkingDirectoryInvalid},
		{"working directory is a file", func(r *proc.Request) { r.WorkingDirectory = file }, proc.ReasonWorkingDirectoryInvalid},
		{"relative working directory", func(r *proc.Request) { r.WorkingDirectory = "tmp" }, proc.ReasonWorkingDirectoryInvalid},
		{"empty working directory", func(r *proc.Request) { r.WorkingDirectory = "" }, proc.ReasonWorkingDirectoryInvalid},
		{"bad environment key", func(r *proc.Request) { r.Environment = map[string]string{"A=B": "c"} }, proc.ReasonStartFailed},
		{"NUL in argument", func(r *proc.Request) { r.Arguments = []string{"a\x00b"} }, proc.ReasonStartFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fds := fdCount(t)
			r := base
			tc.mutate(&r)
			p, err := Start(r, nil)
			require.Nil(t, p)
			requireReason(t, err, tc.reason)
			require.Equal(t, fds, fdCount(t), "leaked file descriptors")
		})
	}
}

func TestConfig(t *testing.T) {
	_, err := Start(shReq(t, "true"), &proc.Config{StdinWindow: -1})
	require.ErrorIs(t, err, proc.ErrInvalidConfig)
	_, err = Start(shReq(t, "true"), &proc.Config{DestroyWait: -1})
	require.ErrorIs(t, err, proc.ErrInvalidConfig)

	c, err := (&proc.Config{StdoutWindow: 7}).Resolve()
	require.NoError(t, err)
	want := *proc.DefaultConfig()
	want.StdoutWindow = 7
	require.Equal(t, want, c)
}
