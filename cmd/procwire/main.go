// Command procwire serves processes over procwire.v1 and uses them.
//
//	procwire serve [flags]                 run a server
//	procwire exec [flags] URL -- CMD ARGS  run CMD remotely as if it were a local child
//	procwire demo [flags]                  stream data through a remote cat over a connection cut mid-stream
//	procwire version                       print the version
//
// Run "procwire help" for the flags.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/server"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

const usage = `procwire carries one remote process's stdio over WebSockets (procwire.v1).

Usage:
  procwire serve [--addr HOST:PORT] [--token-file F] [--tls-cert F --tls-key F]
                 [--grace D] [--stdout-window N] [--stdin-window N]
                 [--stderr-ring N] [--heartbeat D] [--max-processes N]
  procwire exec [--token-file F] [--instance ID] [--cwd DIR] [--env K=V]...
                [--inherit-env] URL -- CMD [ARGS...]
  procwire demo [--bytes N] [--cuts N] [--seed N]
  procwire version
  procwire help

The token is read from --token-file, else from $PROCWIRE_TOKEN. Without a
token, serve listens on loopback only. "procwire help CMD" lists CMD's flags.
`

// run is main without the process: it returns the exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "serve":
		return serve(ctx, rest, stderr)
	case "exec":
		return execute(ctx, rest, stdin, stdout, stderr)
	case "demo":
		return demo(ctx, rest, stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, versionString())
		return 0
	case "help", "-h", "-help", "--help":
		if len(rest) > 0 {
			return run(ctx, []string{rest[0], "-h"}, stdin, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "procwire: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
}

// versionString names the build, the wire revision and the Go release.
func versionString() string {
	v := server.Revision
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	return fmt.Sprintf("procwire %s (wire %s, %s %s/%s)", v, frames.WireRevision, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
