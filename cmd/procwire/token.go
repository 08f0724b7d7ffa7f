//go:build linux

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"
)

// tokenEnv names the environment variable holding the bearer token.
const tokenEnv = "PROCWIRE_TOKEN"

// minTokenBytes is the shortest token accepted, from a file or from
// $PROCWIRE_TOKEN, by serve and by the clients alike.
const minTokenBytes = 16

// maxTokenFile bounds what a token file may hold.
const maxTokenFile = 4096

// errTokenFileMode is returned (wrapped) for a token file that its group or
// other users may read.
var errTokenFileMode = errors.New("readable by group or others")

// errBadToken is returned (wrapped) for a token too short or holding
// spaces or control characters.
var errBadToken = errors.New("not a token")

// readToken returns the token in file, or $PROCWIRE_TOKEN when file is
// empty; no token at all is "". Surrounding white space is trimmed. A
// token file that group or others may read is refused (chmod 600 it), and
// so is a token, from either place, shorter than minTokenBytes or with
// white space or control characters inside: a variable set to spaces is a
// mistake, not "no token".
func readToken(file string) (string, error) {
	if file == "" {
		v, set := os.LookupEnv(tokenEnv)
		if !set || v == "" {
			return "", nil
		}
		t, err := checkToken(v)
		if err != nil {
			return "", fmt.Errorf("$%s: %w", tokenEnv, err)
		}
		return t, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("--token-file %s: not a regular file", file)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("--token-file %s: %w (mode %v): chmod 600 it", file, errTokenFileMode, fi.Mode().Perm())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	if len(b) > maxTokenFile {
		return "", fmt.Errorf("--token-file %s: %w: longer than %d bytes", file, errBadToken, maxTokenFile)
	}
	if strings.TrimSpace(string(b)) == "" {
		return "", errors.New("--token-file " + file + ": empty")
	}
	t, err := checkToken(string(b))
	if err != nil {
		return "", fmt.Errorf("--token-file %s: %w", file, err)
	}
	return t, nil
}

// checkToken trims v and checks that what is left is a token: at least
// minTokenBytes bytes, none of them white space or a control character.
func checkToken(v string) (string, error) {
	t := strings.TrimSpace(v)
	if i := strings.IndexFunc(t, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }); i >= 0 {
		return "", fmt.Errorf("%w: white space or a control character at byte %d", errBadToken, i)
	}
	if len(t) < minTokenBytes {
		return "", fmt.Errorf("%w: %d bytes, fewer than %d: make one with head -c 32 /dev/urandom | base64", errBadToken, len(t), minTokenBytes)
	}
	return t, nil
}
