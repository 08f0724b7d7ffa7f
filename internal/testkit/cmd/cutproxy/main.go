// Command cutproxy runs the repository's cutting proxy (internal/testkit/cutproxy) as
// a process, for tests written in other languages (the TypeScript client's).
//
//	cutproxy -target 127.0.0.1:7777
//
// It prints "addr HOST:PORT" on stdout once it listens, then reads commands
// from stdin, one a line, and answers each with one line:
//
//	cutat N...   arm cuts after each of these byte counts   -> "ok"
//	cutall       cut every live connection now               -> "cut N"
//	refuse BOOL  close new connections at once (or not)      -> "ok"
//	drop BOOL    discard the target's replies (or not)        -> "ok"
//	cuts         how many cuts were made                      -> "cuts N"
//	accepted     how many connections were forwarded          -> "accepted N"
//	wait N       wait until N cuts were made                  -> "cuts N"
//
// A bad command is answered "error ..." and changes nothing. End of stdin
// closes the proxy and exits.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/procwire/procwire/internal/testkit/cutproxy"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, in io.Reader, out, errw io.Writer) int {
	fs := flag.NewFlagSet("cutproxy", flag.ContinueOnError)
	fs.SetOutput(errw)
	target := fs.String("target", "", "`host:port` to forward to")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *target == "" || fs.NArg() > 0 {
		fmt.Fprintln(errw, "usage: cutproxy -target HOST:PORT")
		return 2
	}
	p, err := cutproxy.New(*target)
	if err != nil {
		fmt.Fprintf(errw, "cutproxy: %v\n", err)
		return 1
	}
	defer p.Close()
	fmt.Fprintf(out, "addr %s\n", p.Addr())
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		fmt.Fprintln(out, command(p, strings.Fields(sc.Text())))
	}
	return 0
}

// command runs one command line and returns its answer.
func command(p *cutproxy.Proxy, f []string) string {
	if len(f) == 0 {
		return "error: empty command"
	}
	switch f[0] {
	case "cutat":
		var counts []int64
		for _, s := range f[1:] {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil || n <= 0 {
				return "error: cutat takes positive byte counts"
			}
			counts = append(counts, n)
		}
		p.CutAt(counts...)
		return "ok"
	case "cutall":
		return "cut " + strconv.Itoa(p.CutAll())
	case "refuse", "drop":
		if len(f) != 2 {
			return "error: " + f[0] + " takes true or false"
		}
		b, err := strconv.ParseBool(f[1])
		if err != nil {
			return "error: " + f[0] + " takes true or false"
		}
		if f[0] == "refuse" {
			p.Refuse(b)
		} else {
			p.DropReplies(b)
		}
		return "ok"
	case "cuts":
		return "cuts " + strconv.Itoa(p.Cuts())
	case "accepted":
		return "accepted " + strconv.Itoa(p.Accepted())
	case "wait":
		if len(f) != 2 {
			return "error: wait takes a count"
		}
		n, err := strconv.Atoi(f[1])
		if err != nil {
			return "error: wait takes a count"
		}
		if err := p.WaitCuts(context.Background(), n); err != nil {
			return "error: " + err.Error()
		}
		return "cuts " + strconv.Itoa(p.Cuts())
	}
	return "error: unknown command " + strconv.Quote(f[0])
}
