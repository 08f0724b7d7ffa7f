//go:build linux

package bridge

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// startFailure builds a *StartError.
func startFailure(reason string, err error) *StartError {
	return &StartError{Reason: reason, Err: err}
}

// checkDir validates the working directory the child will chdir into.
func checkDir(dir string) error {
	if dir == "" || !filepath.IsAbs(dir) {
		return startFailure(ReasonWorkingDirectoryInvalid, fmt.Errorf("working directory %q is not an absolute path", dir))
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return startFailure(ReasonWorkingDirectoryInvalid, err)
	}
	if !fi.IsDir() {
		return startFailure(ReasonWorkingDirectoryInvalid, fmt.Errorf("working directory %q is not a directory", dir))
	}
	if err := syscall.Access(dir, 1 /* X_OK */); err != nil {
		return startFailure(ReasonWorkingDirectoryInvalid, &fs.PathError{Op: "access", Path: dir, Err: err})
	}
	return nil
}

// buildEnv turns the request's environment into the child's envp, sorted so
// that the child sees a deterministic order. The result is never nil.
func buildEnv(env map[string]string) ([]string, error) {
	out := make([]string, 0, len(env))
	for k, v := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return nil, startFailure(ReasonStartFailed, fmt.Errorf("environment key %q is invalid", k))
		}
		if strings.IndexByte(v, 0) >= 0 {
			return nil, startFailure(ReasonStartFailed, fmt.Errorf("environment value of %q contains NUL", k))
		}
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out, nil
}

// errNotExecutable marks a candidate that exists but cannot be executed.
var errNotExecutable = errors.New("not executable")

// checkExecutable reports whether path names a file the child can execute.
func checkExecutable(path string) error {
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
	if err := syscall.Access(path, 1 /* X_OK */); err != nil {
		return fmt.Errorf("%s: %w: %w", path, errNotExecutable, err)
	}
	return nil
}

// lookPath resolves file, which has no slash, through the directories of
// path (the request's PATH, not the server's). Empty and relative entries
// are taken relative to wd, as the child itself would after its chdir.
// Like execvp, a candidate that exists but is not executable is reported
// as permission denied only when no later directory has an executable one.
func lookPath(file, path, wd string) (string, error) {
	var denied error
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(wd, dir)
		}
		cand := filepath.Join(dir, file)
		err := checkExecutable(cand)
		if err == nil {
			return cand, nil
		}
		if denied == nil && errors.Is(err, errNotExecutable) {
			denied = err
		}
	}
	if denied != nil {
		return "", startFailure(ReasonPermissionDenied, denied)
	}
	return "", startFailure(ReasonExecutableNotFound, fmt.Errorf("%q not found in PATH %q", file, path))
}

// resolveExecutable returns the absolute path to exec for the request.
func resolveExecutable(req *Request) (string, error) {
	exe := req.Executable
	if exe == "" {
		return "", startFailure(ReasonExecutableNotFound, errors.New("empty executable"))
	}
	if strings.IndexByte(exe, 0) >= 0 {
		return "", startFailure(ReasonStartFailed, errors.New("executable contains NUL"))
	}
	if !strings.Contains(exe, "/") {
		path, ok := req.Environment["PATH"]
		if !ok {
			path = DefaultPath
		}
		return lookPath(exe, path, req.WorkingDirectory)
	}
	if !filepath.IsAbs(exe) {
		exe = filepath.Join(req.WorkingDirectory, exe)
	}
	if err := checkExecutable(exe); err != nil {
		if errors.Is(err, errNotExecutable) {
			return "", startFailure(ReasonPermissionDenied, err)
		}
		return "", startFailure(ReasonExecutableNotFound, err)
	}
	return exe, nil
}

// forkFailure classifies an error of syscall.ForkExec, which reports the
// errno of the child's chdir or execve.
func forkFailure(err error) *StartError {
	err = fmt.Errorf("fork/exec: %w", err)
	switch {
	case errors.Is(err, syscall.ENOENT):
		// The file vanished, or its #! interpreter does not exist.
		return startFailure(ReasonExecutableNotFound, err)
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return startFailure(ReasonPermissionDenied, err)
	}
	return startFailure(ReasonStartFailed, err)
}
