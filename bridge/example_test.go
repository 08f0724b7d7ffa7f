//go:build linux

package bridge_test

import (
	"fmt"
	"os"

	"github.com/procwire/procwire/bridge"
	"github.com/procwire/procwire/proc"
	"github.com/procwire/procwire/replay"
)

// A server's writer loop in miniature: wait on Notify, slice and ack stdout,
// report the exit once it is published and stdout has ended.
func Example() {
	p, err := bridge.Start(proc.Request{
		Executable:       "sh",
		Arguments:        []string{"-c", "read name; echo hello $name; exit 3"},
		WorkingDirectory: os.TempDir(),
		Environment:      map[string]string{"PATH": "/usr/bin:/bin"},
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Destroy()

	_ = p.PushStdin([]byte("world\n"))
	_ = p.CloseStdin()
	for {
		var exit proc.ExitStatus
		var done bool
		// The exit and stdout in one look: an exit seen comes with its EOF.
		p.StdoutExit(func(b *replay.Buffer, st proc.ExitStatus, exited bool) {
			x, y, _ := b.Slice(b.Start(), 1<<20)
			fmt.Print(string(x), string(y))
			_ = b.Ack(b.Start() + int64(len(x)+len(y)))
			_, eof := b.EOF()
			exit, done = st, exited && eof
		})
		if done {
			fmt.Println(exit)
			return
		}
		<-p.Notify()
	}
	// Output:
	// hello world
	// exit 3
}
