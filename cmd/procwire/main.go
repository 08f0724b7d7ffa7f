//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/server"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], &stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr}))
}

// stdio is where a command reads and writes.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

// command is one subcommand of procwire. Each registers itself from its
// own file with register.
type command struct {
	name    string
	args    string // what follows "procwire NAME" in the usage line, "[flags]" included
	summary string // one line for "procwire help"
	help    string // the paragraph of "procwire help NAME"; default summary
	run     func(ctx context.Context, args []string, io *stdio) int
}

// commands are the subcommands in the order "procwire help" lists them.
var commands []*command

// register adds c to the subcommands.
func register(c *command) {
	commands = append(commands, c)
	slices.SortStableFunc(commands, func(a, b *command) int { return order(a.name) - order(b.name) })
}

// order puts the main commands first, in the order a new user needs them,
// and any other command after them.
func order(name string) int {
	if i := slices.Index([]string{"serve", "exec", "attach", "demo", "version", "help"}, name); i >= 0 {
		return i
	}
	return 100
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

func init() {
	register(&command{name: "version", args: "", summary: "print the version (also --version, -v)", run: version})
	register(&command{name: "help", args: "[COMMAND]", summary: "print this help, or COMMAND's flags (also -h, --help)", run: help})
}

// run is main without the process: it returns the exit status.
func run(ctx context.Context, args []string, io *stdio) int {
	if len(args) == 0 {
		fmt.Fprint(io.err, usage())
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help":
		args[0] = "help"
	case "-v", "-version", "--version":
		args[0] = "version"
	}
	c := lookup(args[0])
	if c == nil {
		fmt.Fprintf(io.err, "procwire: unknown command %q (run \"procwire help\")\n", args[0])
		return 2
	}
	return c.run(ctx, args[1:], io)
}

// usage is the help of procwire as a whole.
func usage() string {
	var b strings.Builder
	b.WriteString("procwire carries one remote process's stdio over WebSockets (procwire.v1).\n\nUsage:\n")
	width := 0
	lines := make([]string, len(commands))
	for i, c := range commands {
		lines[i] = strings.TrimSpace("procwire " + c.name + " " + c.args)
		width = max(width, len(lines[i]))
	}
	for i, c := range commands {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, lines[i], c.summary)
	}
	b.WriteString(`
The token is read from --token-file, else from $PROCWIRE_TOKEN. Without a
token, serve listens on loopback only. "procwire help COMMAND" lists the
flags of COMMAND.
`)
	return b.String()
}

func help(ctx context.Context, args []string, io *stdio) int {
	if len(args) == 0 {
		fmt.Fprint(io.out, usage())
		return 0
	}
	c := lookup(args[0])
	if c == nil || c.name == "help" {
		fmt.Fprintf(io.err, "procwire help: unknown command %q (run \"procwire help\")\n", args[0])
		return 2
	}
	return c.run(ctx, []string{"--help"}, io)
}

func version(_ context.Context, args []string, io *stdio) int {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Fprintln(io.out, "Usage: procwire version\n\nPrint the version: the provider revision that servers report in\nevidence, the wire revision, and the build.")
		return 0
	}
	if len(args) > 0 {
		fmt.Fprintf(io.err, "procwire version: unexpected argument %q\n", args[0])
		return 2
	}
	fmt.Fprintln(io.out, versionString())
	return 0
}

// versionString names the provider revision (the one a server started by
// this binary reports in evidence: server.Revision), the wire revision, the
// build's commit when it is known, and the Go release.
func versionString() string {
	extra := ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				extra = ", commit " + s.Value[:12]
			}
		}
	}
	return fmt.Sprintf("procwire %s (%s%s, %s %s/%s)", server.Revision, frames.WireRevision, extra, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
