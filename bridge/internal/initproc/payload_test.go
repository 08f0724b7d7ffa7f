//go:build linux

package initproc

import (
	"bytes"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// full is a payload with every field set.
func full() *Payload {
	return &Payload{
		Mode: ModeGuardian, Path: "/bin/sh", Argv: []string{"sh", "-c", "echo \x00é"}, Env: []string{"A=1", "PATH=/bin"},
		Rlimits: []Rlimit{{Resource: 7, Cur: 1024, Max: 1 << 63}},
		Harden: &Harden{NoNewPrivs: true, KeepCaps: []uintptr{10, 40}, Umask: 0o077,
			Rlimits: []Rlimit{{Resource: 4, Cur: 0, Max: 0}},
			Cred:    &Cred{UID: 65534, GID: 65534, Groups: []uint32{1, 1<<32 - 1}}, PrivateProc: true},
		Dir: "/tmp", TTY: true,
	}
}

// What WritePayload writes, ReadPayload reads back equal, through a
// reader that hands out a byte at a time.
func TestPayloadRoundTrips(t *testing.T) {
	for _, pl := range []*Payload{
		full(),
		{Mode: ModePIDNamespace, Path: "/bin/true", Argv: []string{"true"}},
		{Mode: ModeGuardian, Path: "/x", Argv: []string{"x"}, Harden: &Harden{}},
		{Mode: ModeGuardian, Path: "/x", Argv: []string{"x"}, Harden: &Harden{Cred: &Cred{}}},
	} {
		var buf bytes.Buffer
		require.NoError(t, WritePayload(&buf, pl))
		got, err := ReadPayload(iotest.OneByteReader(&buf))
		require.NoError(t, err)
		require.Equal(t, pl, got)
		require.Zero(t, buf.Len())
	}
}

// A payload cut at any byte, or with a byte more, is an error, never a
// panic or a partial payload.
func TestPayloadCutAnywhereIsAnError(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, WritePayload(&buf, full()))
	b := buf.Bytes()
	for n := range len(b) {
		_, err := DecodePayload(b[:n])
		require.Error(t, err, "cut at %d of %d", n, len(b))
	}
	_, err := DecodePayload(append(bytes.Clone(b), 0))
	require.ErrorContains(t, err, "after its end")
}

func TestPayloadRefusesWhatTheInitCannotRun(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, WritePayload(&buf, &Payload{Mode: "fork_bomb", Path: "/x"}))
	_, err := ReadPayload(&buf)
	require.ErrorContains(t, err, `init mode "fork_bomb"`)

	// A length past MaxPayload is refused before anything is allocated.
	_, err = ReadPayload(bytes.NewReader([]byte{0xff, 0xff, 0xff, 0xff}))
	require.ErrorContains(t, err, "exceeds")
	// A count larger than what is left, a flag that is no flag, a
	// number over 32 bits where one is expected.
	for _, b := range [][]byte{
		{0xff, 0xff, 0xff, 0xff, 0x0f},
		append(enc1(func(e *enc) { e.str(ModeGuardian); e.rlimits(nil) }), 2),
		enc1(func(e *enc) {
			e.str(ModeGuardian)
			e.uint(1)
			e.uint(1 << 40)
		}),
	} {
		err := decodeSetup(b, &Payload{})
		require.ErrorIs(t, err, errShort, "%x", b)
	}
	// A user to switch the child to, without the hardening that would.
	b := enc1(func(e *enc) {
		e.str("/x")
		e.strs(nil)
		e.strs(nil)
		e.str("/")
		e.flag(false)
		e.cred(&Cred{UID: 1})
	})
	require.ErrorContains(t, decodeChild(b, &Payload{Mode: ModeGuardian}), "without hardening")
}

// The set-up a warm init applies ahead is the same for processes that
// differ only in their child and its user; a set-up that differs has
// another key.
func TestSetupKeyLeavesOutTheChild(t *testing.T) {
	a, b := full(), full()
	b.Path, b.Argv, b.Env, b.Dir, b.TTY = "/bin/true", []string{"true"}, nil, "/", false
	b.Harden.Cred = &Cred{UID: 7, GID: 7}
	require.Equal(t, SetupKey(a), SetupKey(b))
	b.Harden.Umask = 0o022
	require.NotEqual(t, SetupKey(a), SetupKey(b))
	c := full()
	c.Rlimits = nil
	require.NotEqual(t, SetupKey(a), SetupKey(c))
}

// The set-up and the child read one by one, as a warm init reads them,
// make the payload ReadPayload reads at once.
func TestSetupThenChild(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, WriteSetup(&buf, full()))
	pl, err := ReadSetup(&buf)
	require.NoError(t, err)
	require.Empty(t, pl.Path)
	require.Nil(t, pl.Harden.Cred)
	require.NoError(t, WriteChild(&buf, full()))
	require.NoError(t, ReadChild(&buf, pl))
	require.Equal(t, full(), pl)
}

// enc1 returns what f encodes.
func enc1(f func(*enc)) []byte {
	var e enc
	f(&e)
	return e.b
}

// FuzzDecodePayload: any bytes decode to a payload or an error, never a
// panic, and a payload that decodes encodes to bytes that decode to it.
func FuzzDecodePayload(f *testing.F) {
	var buf bytes.Buffer
	_ = WritePayload(&buf, full())
	f.Add(buf.Bytes())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		pl, err := DecodePayload(b)
		if err != nil {
			return
		}
		var again bytes.Buffer
		require.NoError(t, WritePayload(&again, pl))
		pl2, err := ReadPayload(&again)
		require.NoError(t, err)
		require.Equal(t, pl, pl2)
	})
}

// The init runs from this package's initialisation, which comes early
// only while the package imports nothing heavy: no encoding/json, no fmt,
// no golang.org/x/sys/unix, nothing of the network (package doc). Nor
// strings, bytes or bufio: strings sorts after reflect, so reflect is
// initialised before it, and then every package that needs reflect and
// sorts before ours (crypto/..., encoding/json, flag) before ours too.
// TestInitRunsBeforeHeavyPackages (in bridge) checks the order itself.
func TestImportsStayLight(t *testing.T) {
	light := map[string]bool{
		"errors": true, "io": true, "os": true, "os/signal": true, "runtime": true,
		"slices": true, "strconv": true, "sync": true, "syscall": true, "time": true, "unsafe": true,
	}
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	for _, name := range files {
		if len(name) > 8 && name[len(name)-8:] == "_test.go" {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			require.True(t, light[path], "%s imports %s, which may delay the init (package doc)", name, path)
		}
	}
}

func TestStatFields(t *testing.T) {
	for in, want := range map[string][]string{
		"12 (cat) S 1 12 12 0\n":      {"S", "1", "12", "12", "0"},
		"7 (a) b (c)) R  3 4\n":       {"R", "3", "4"},
		"9 (x)":                       nil,
		"no parenthesis at all S 1 2": nil,
	} {
		require.Equal(t, want, StatFields([]byte(in)), in)
	}
}

// The server writes CtlByte's byte and the init obeys CtlSignal's signal:
// one table, read both ways, each signal its own byte.
func TestControlBytesAskForTheirSignal(t *testing.T) {
	seen := map[byte]bool{}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGKILL} {
		c, ok := CtlByte(sig)
		require.True(t, ok, "%v", sig)
		require.False(t, seen[c], "byte %q twice", c)
		seen[c] = true
		back, ok := CtlSignal(c)
		require.True(t, ok)
		require.Equal(t, sig, back)
	}
	_, ok := CtlByte(syscall.SIGHUP)
	require.False(t, ok)
	_, ok = CtlSignal('\n')
	require.False(t, ok)
}
