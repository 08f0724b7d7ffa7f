//go:build linux

package bridge

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/procwire/procwire/proc"
)

// startFailure builds a *StartError.
func startFailure(reason string, err error) *proc.StartError {
	return &proc.StartError{Reason: reason, Err: err}
}

// checkDir validates the working directory the child will chdir into,
// as user as would see it (nil: the server's own user).
func checkDir(dir string, as *proc.User) error {
	if dir == "" || !filepath.IsAbs(dir) {
		return startFailure(proc.ReasonWorkingDirectoryInvalid, fmt.Errorf("working directory %q is not an absolute path", dir))
	}
	if err := searchableAs(dir, as); err != nil {
		return startFailure(proc.ReasonWorkingDirectoryInvalid, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return startFailure(proc.ReasonWorkingDirectoryInvalid, err)
	}
	if !fi.IsDir() {
		return startFailure(proc.ReasonWorkingDirectoryInvalid, fmt.Errorf("working directory %q is not a directory", dir))
	}
	if err := accessAs(dir, fi, as); err != nil {
		return startFailure(proc.ReasonWorkingDirectoryInvalid, err)
	}
	return nil
}

// searchableAs reports, for a server running its children as another
// user, whether that user may search every directory above path: if not,
// the answer is EACCES whatever lies below, so that the checks the server
// makes as root never tell a client more than the user could find out
// (whether /root/.bashrc exists, its mode). nil as: no check (the
// server's own user sees what it sees).
func searchableAs(path string, as *proc.User) error {
	if as == nil || as.UID == 0 {
		return nil
	}
	for dir := filepath.Dir(filepath.Clean(path)); ; dir = filepath.Dir(dir) {
		fi, err := os.Stat(dir)
		if err != nil {
			return &fs.PathError{Op: "access", Path: path, Err: syscall.EACCES}
		}
		if !permits(fi, as, 1) {
			return &fs.PathError{Op: "access", Path: path, Err: syscall.EACCES}
		}
		if dir == "/" {
			return nil
		}
	}
}

// accessAs is access(2) with X_OK for path, whose stat is fi, as user as
// (nil: the server's own user, by the kernel).
func accessAs(path string, fi fs.FileInfo, as *proc.User) error {
	if as == nil {
		if err := syscall.Access(path, 1 /* X_OK */); err != nil {
			return &fs.PathError{Op: "access", Path: path, Err: err}
		}
		return nil
	}
	if !permits(fi, as, 1) {
		return &fs.PathError{Op: "access", Path: path, Err: syscall.EACCES}
	}
	return nil
}

// permits reports whether the permission bits of fi grant u the access
// want (1 execute/search, 2 write, 4 read): the owner's bits for its
// owner, the group's for a member, the others' otherwise; root needs one
// execute bit to execute a file, and nothing for a directory.
func permits(fi fs.FileInfo, u *proc.User, want uint32) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	mode := uint32(fi.Mode().Perm())
	if u.UID == 0 {
		return fi.IsDir() || want&1 == 0 || mode&0o111 != 0
	}
	switch {
	case st.Uid == u.UID:
		mode >>= 6
	case st.Gid == u.GID || slices.Contains(u.Groups, st.Gid):
		mode >>= 3
	}
	return mode&want == want
}

// buildEnv turns the request's environment into the child's envp, sorted so
// that the child sees a deterministic order. The result is never nil.
func buildEnv(env map[string]string) ([]string, error) {
	out := make([]string, 0, len(env))
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, startFailure(proc.ReasonStartFailed, fmt.Errorf("environment key %q is invalid", k))
		}
		if strings.IndexByte(v, 0) >= 0 {
			return nil, startFailure(proc.ReasonStartFailed, fmt.Errorf("environment value of %q contains NUL", k))
		}
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out, nil
}

// errNotExecutable marks a candidate that exists but cannot be executed.
var errNotExecutable = errors.New("not executable")

// checkExecutable reports whether path names a file the child, running as
// as (nil: the server's own user), can execute.
func checkExecutable(path string, as *proc.User) error {
	if err := searchableAs(path, as); err != nil {
		return fmt.Errorf("%w: %w", errNotExecutable, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return fmt.Errorf("%w: %w", errNotExecutable, err)
		}
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: %w: not a regular file", path, errNotExecutable)
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s: %w: mode %v", path, errNotExecutable, fi.Mode().Perm())
	}
	if err := accessAs(path, fi, as); err != nil {
		return fmt.Errorf("%w: %w", errNotExecutable, err)
	}
	return nil
}

// lookPath resolves file, which has no slash, through the directories of
// path (the request's PATH, not the server's). Empty and relative entries
// are taken relative to wd, as the child itself would after its chdir.
// Like execvp, a candidate that exists but is not executable is reported
// as permission denied only when no later directory has an executable one.
func lookPath(file, path, wd string, as *proc.User) (string, error) {
	var denied error
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(wd, dir)
		}
		cand := filepath.Join(dir, file)
		err := checkExecutable(cand, as)
		if err == nil {
			return cand, nil
		}
		if denied == nil && errors.Is(err, errNotExecutable) {
			denied = err
		}
	}
	if denied != nil {
		return "", startFailure(proc.ReasonPermissionDenied, denied)
	}
	return "", startFailure(proc.ReasonExecutableNotFound, fmt.Errorf("%q not found in PATH %q", file, path))
}

// resolveExecutable returns the absolute path to exec for the request,
// checked as user as (nil: the server's own user) would see it.
func resolveExecutable(req *proc.Request, as *proc.User) (string, error) {
	exe := req.Executable
	if exe == "" {
		return "", startFailure(proc.ReasonExecutableNotFound, errors.New("empty executable"))
	}
	if strings.IndexByte(exe, 0) >= 0 {
		return "", startFailure(proc.ReasonStartFailed, errors.New("executable contains NUL"))
	}
	if !strings.Contains(exe, "/") {
		path, ok := req.Environment["PATH"]
		if !ok {
			path = proc.DefaultPath
		}
		return lookPath(exe, path, req.WorkingDirectory, as)
	}
	if !filepath.IsAbs(exe) {
		exe = filepath.Join(req.WorkingDirectory, exe)
	}
	if err := checkExecutable(exe, as); err != nil {
		if errors.Is(err, errNotExecutable) {
			return "", startFailure(proc.ReasonPermissionDenied, err)
		}
		return "", startFailure(proc.ReasonExecutableNotFound, err)
	}
	return exe, nil
}

// forkFailure classifies an error of syscall.ForkExec, which reports the
// errno of the child's chdir or execve.
func forkFailure(err error) *proc.StartError {
	err = fmt.Errorf("fork/exec: %w", err)
	switch {
	case errors.Is(err, syscall.ENOENT):
		// The file vanished, or its #! interpreter does not exist.
		return startFailure(proc.ReasonExecutableNotFound, err)
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return startFailure(proc.ReasonPermissionDenied, err)
	}
	return startFailure(proc.ReasonStartFailed, err)
}
