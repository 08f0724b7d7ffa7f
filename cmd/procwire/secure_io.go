//go:build linux

package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode"
)

// writeFileReplacing writes b to path as a new file of mode perm: a
// temporary file created beside it (O_EXCL, a random name: nothing
// planted is opened or followed), then renamed over path, which replaces
// whatever path was (a symlink itself, not what it points to) in one
// step. A reader never sees a half-written file.
func writeFileReplacing(path string, b []byte, perm os.FileMode) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// escapeControl returns s with its control characters (C0, DEL, C1)
// written as \xNN or \u00NN, so that text from a server cannot drive the
// terminal it is printed on (escape sequences, a carriage return hiding
// the line). Other characters are kept.
func escapeControl(s string) string {
	if strings.IndexFunc(s, unicode.IsControl) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// handleMAC binds a handle to the server it was made for: an HMAC, keyed
// by the server's token, of the server's URL and the process id. attach
// sends the token only to a URL whose MAC checks out (or to a --url the
// user names), so that a forged handle cannot send the token elsewhere.
func handleMAC(token, url, processID string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("procwire handle url\x00" + url + "\x00" + processID))
	return hex.EncodeToString(m.Sum(nil))
}

// errHandleNotBound is returned (wrapped) by checkHandleURL for a handle
// whose URL the token was not used with.
var errHandleNotBound = errors.New("the handle was not made with this token")

// checkHandleURL reports whether the token may go to the handle's URL:
// the handle's url_mac is the MAC of its URL under token.
func checkHandleURL(h *handleDoc, token string) error {
	if token == "" {
		return nil // no token to hand over
	}
	want := handleMAC(token, h.URL, h.ProcessID)
	if h.URLMAC == "" || !hmac.Equal([]byte(h.URLMAC), []byte(want)) {
		return fmt.Errorf("%w: it names %s; not sending the token there (give --url to name the server yourself)", errHandleNotBound, escapeControl(h.URL))
	}
	return nil
}
