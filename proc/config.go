package proc

import (
	"fmt"
	"time"
)

// Defaults used for zero fields of Config.
const (
	DefaultStdoutWindow = 4 << 20
	DefaultStderrRing   = 64 << 10
	DefaultStdinWindow  = 1 << 20
	DefaultExitWait     = time.Second
	DefaultDestroyWait  = 5 * time.Second
)

// Config bounds the memory and the waits of one Process. A zero field takes
// its default; a negative one is rejected by Resolve with ErrInvalidConfig.
type Config struct {
	// StdoutWindow is the capacity of the stdout replay buffer: the most
	// bytes the child can have written that the server has not acked.
	StdoutWindow int
	// StderrRing is the capacity of the lossy stderr ring.
	StderrRing int
	// StdinWindow is the capacity of the stdin queue: the most bytes pushed
	// and not yet written to the child's pipe.
	StdinWindow int
	// ExitWait is how long the exit of a child that has exited waits for
	// the EOF of stdout and stderr before it is published anyway, so that a
	// descendant holding them open (sh -c 'sleep 300 &') cannot hold the
	// exit back. The streams keep flowing until their own EOF or Destroy.
	ExitWait time.Duration
	// DestroyWait bounds Destroy.
	DestroyWait time.Duration
	// RunAs, when set, is the user and groups the child runs as; nil runs
	// it as the server's own user.
	RunAs *User
	// Limits, when set, tighten the limits of the containment for this
	// process (never loosen them; see Limits.Tighten). Zero: the
	// containment's.
	Limits Limits
	// TTY, when set, starts the child on a new pseudo-terminal of that
	// size (see TTY); nil gives it pipes.
	TTY *TTY
}

// User is an identity a child runs as: a user id, a primary group and the
// supplementary groups (none when empty).
type User struct {
	UID, GID uint32
	Groups   []uint32
}

// String returns "uid 65534 gid 65534".
func (u *User) String() string {
	return fmt.Sprintf("uid %d gid %d", u.UID, u.GID)
}

// DefaultConfig returns a Config with every field at its default.
func DefaultConfig() *Config {
	return &Config{
		StdoutWindow: DefaultStdoutWindow,
		StderrRing:   DefaultStderrRing,
		StdinWindow:  DefaultStdinWindow,
		ExitWait:     DefaultExitWait,
		DestroyWait:  DefaultDestroyWait,
	}
}

// Resolve returns a copy of c with defaults filled in (nil means every
// default), or an error wrapping ErrInvalidConfig for a negative field.
func (c *Config) Resolve() (Config, error) {
	d := *DefaultConfig()
	if c == nil {
		return d, nil
	}
	r := *c
	for _, f := range []struct {
		name string
		v    *int
		def  int
	}{
		{"StdoutWindow", &r.StdoutWindow, d.StdoutWindow},
		{"StderrRing", &r.StderrRing, d.StderrRing},
		{"StdinWindow", &r.StdinWindow, d.StdinWindow},
	} {
		if *f.v < 0 {
			return Config{}, fmt.Errorf("%w: %s is %d", ErrInvalidConfig, f.name, *f.v)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	for _, f := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"ExitWait", &r.ExitWait, d.ExitWait},
		{"DestroyWait", &r.DestroyWait, d.DestroyWait},
	} {
		if *f.v < 0 {
			return Config{}, fmt.Errorf("%w: %s is %v", ErrInvalidConfig, f.name, *f.v)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	return r, nil
}
