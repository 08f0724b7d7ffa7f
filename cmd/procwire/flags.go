//go:build linux

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"strings"
	"time"

	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/internal/size"
)

// newFlags returns the flag set of c. Its errors are not printed by the
// flag package: parse prints them in procwire's one format.
func newFlags(c *command) *flag.FlagSet {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parse parses args with fs, flags and arguments in any order. With
// stopAfter > 0, the arguments after the stopAfter-th that is not a flag
// are returned untouched as rest: they start after a "--" or at the first
// argument that is not a flag. A "--" before that ends the flags too. On -h
// or --help parse prints c's help on stdout and returns status 0 and ok
// false; on a bad flag it prints one line on stderr and returns
// usageStatus and ok false.
func parse(c *command, fs *flag.FlagSet, args []string, stopAfter int, io *stdio, usageStatus int) (positional, rest []string, status int, ok bool) {
	for {
		if stopAfter > 0 && len(positional) == stopAfter && len(args) > 0 && args[0] == "--" {
			return positional, args[1:], 0, true
		}
		before := len(args)
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			printHelp(io.out, c, fs)
			return nil, nil, 0, false
		}
		if err != nil {
			status, ok := usageFailure(c, io, usageStatus, "%v", err)
			return nil, nil, status, ok
		}
		left := fs.Args()
		dashdash := before > len(left) && args[before-len(left)-1] == "--"
		if dashdash || len(left) == 0 || (stopAfter > 0 && len(positional) == stopAfter) {
			if stopAfter <= 0 || dashdash && len(positional) < stopAfter {
				// "--" before the positional arguments: no more flags.
				positional = append(positional, left...)
				left = nil
				if stopAfter > 0 && len(positional) > stopAfter {
					positional, left = positional[:stopAfter], positional[stopAfter:]
				}
			}
			return positional, left, 0, true
		}
		positional = append(positional, left[0])
		args = left[1:]
	}
}

// usageFailure prints a usage error of c on one line and returns status
// and false.
func usageFailure(c *command, io *stdio, status int, format string, args ...any) (int, bool) {
	fmt.Fprintf(io.err, "procwire %s: %s (run \"procwire help %s\")\n", c.name, fmt.Sprintf(format, args...), c.name)
	return status, false
}

// printHelp prints c's help, in the one format of every command:
// a usage line, what it does, and its flags with "--".
func printHelp(w io.Writer, c *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: procwire %s\n\n%s\n", strings.TrimSpace(c.name+" "+c.args), c.long())
	if fs == nil {
		return
	}
	first := true
	fs.VisitAll(func(f *flag.Flag) {
		if first {
			fmt.Fprint(w, "\nFlags:\n")
			first = false
		}
		name, text := flag.UnquoteUsage(f)
		if _, isBool := f.Value.(interface{ IsBoolFlag() bool }); isBool {
			name = ""
		}
		line := "  --" + f.Name
		if name != "" {
			line += " " + name
		}
		fmt.Fprintf(w, "%s\n    \t%s", line, strings.ReplaceAll(text, "\n", "\n    \t"))
		if d := f.DefValue; d != "" && d != "0" && d != "false" && d != "0s" && d != "[]" {
			fmt.Fprintf(w, " (default %s)", d)
		}
		fmt.Fprintln(w)
	})
}

// long returns the paragraph under c's usage line.
func (c *command) long() string {
	if c.help != "" {
		return c.help
	}
	return c.summary + "."
}

// durationFlag is a duration flag whose zero is refused (it would only
// mean "the default"), and negatives too unless negative says what one
// means.
type durationFlag struct {
	d        *time.Duration
	negative string // what a negative value means; "" refuses it
}

func (p durationFlag) String() string {
	if p.d == nil {
		return ""
	}
	return p.d.String()
}

func (p durationFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("not a duration such as 30s or 2m")
	}
	switch {
	case d == 0 && p.negative != "":
		return fmt.Errorf("0 means nothing here: give a positive duration, or a negative one for %s", p.negative)
	case d <= 0 && p.negative == "":
		return errors.New("must be above 0")
	}
	*p.d = d
	return nil
}

// intRange is an integer flag that refuses values outside lo..hi.
type intRange struct {
	v      *int
	lo, hi int
}

func (r intRange) String() string {
	if r.v == nil {
		return ""
	}
	return fmt.Sprint(*r.v)
}

func (r intRange) Set(s string) error {
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil || fmt.Sprint(n) != strings.TrimPrefix(s, "+") {
		return errors.New("not an integer")
	}
	if n < r.lo || n > r.hi {
		return fmt.Errorf("must be within %d..%d", r.lo, r.hi)
	}
	*r.v = n
	return nil
}

// sizeRange is a size flag (internal/size: bytes, or a binary unit such as
// 64KiB or 512MiB) that refuses values outside lo..hi.
type sizeRange[T int | int64] struct {
	v      *T
	lo, hi int64
}

func (r sizeRange[T]) String() string {
	if r.v == nil {
		return ""
	}
	return size.Format(int64(*r.v))
}

func (r sizeRange[T]) Set(s string) error {
	n, err := size.Parse(s)
	if err != nil {
		return err
	}
	if n < r.lo || n > r.hi {
		return fmt.Errorf("must be within %s..%s", size.Format(r.lo), size.Format(r.hi))
	}
	*r.v = T(n)
	return nil
}

// envFlags collects repeated --env K=V flags.
type envFlags []string

// String implements flag.Value.
func (e *envFlags) String() string { return strings.Join(*e, " ") }

// Set implements flag.Value: it takes one KEY=VALUE.
func (e *envFlags) Set(v string) error {
	k, _, ok := strings.Cut(v, "=")
	if !ok || !frames.ValidEnvKey(k) {
		return fmt.Errorf("want KEY=VALUE with KEY matching [A-Za-z_][A-Za-z0-9_]*, got %q", v)
	}
	*e = append(*e, v)
	return nil
}

// headerFlags collects repeated --header 'Name: value' flags.
type headerFlags struct{ h http.Header }

// String implements flag.Value.
func (f *headerFlags) String() string { return "" }

// Set implements flag.Value: it takes one "Name: value".
func (f *headerFlags) Set(v string) error {
	k, val, ok := strings.Cut(v, ":")
	k = strings.TrimSpace(k)
	if !ok || k == "" || strings.ContainsAny(k, " \t\r\n") || strings.ContainsAny(val, "\r\n") {
		return fmt.Errorf("want 'Name: value', got %q", v)
	}
	for _, r := range k {
		if r > 0x7e || r <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return fmt.Errorf("header name %q is not a token", k)
		}
	}
	k = textproto.CanonicalMIMEHeaderKey(k)
	switch {
	case k == "Authorization":
		return errors.New("the token goes in --token-file or $PROCWIRE_TOKEN, not in a header")
	case k == "Host" || strings.HasPrefix(k, "Sec-Websocket-") || k == "Upgrade" || k == "Connection":
		return fmt.Errorf("header %s is the WebSocket handshake's own", k)
	}
	if f.h == nil {
		f.h = http.Header{}
	}
	f.h.Add(k, strings.TrimSpace(val))
	return nil
}
