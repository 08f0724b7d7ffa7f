//go:build linux

package bridge_test

import (
	"fmt"
	"os"

	"github.com/procwire/procwire/bridge"
	"github.com/procwire/procwire/replay"
)

// A server's writer loop in miniature: wait on Notify, slice and ack stdout,
// report the exit once it is published and stdout has ended.
func Example() {
	p, err := bridge.Start(bridge.Request{
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
	for eof := false; ; {
		p.Stdout(func(b *replay.Buffer) {
			x, y, _ := b.Slice(b.Start(), 1<<20)
			fmt.Print(string(x), string(y))
			_ = b.Ack(b.Start() + int64(len(x)+len(y)))
			_, eof = b.EOF()
		})
		if st, ok := p.Exit(); ok && eof {
			fmt.Println(st)
			return
		}
		<-p.Notify()
	}
	// Output:
	// hello world
	// exit 3
}
