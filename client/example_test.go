//go:build linux

package client_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/server"
)

func ExampleOpen() {
	// A server on loopback, for the example.
	srv, _ := server.New(server.Config{})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer srv.Shutdown(context.Background())
	url := "ws" + strings.TrimPrefix(hs.URL, "http")

	ctx := context.Background()
	p, err := client.Open(ctx, url, "inst-1", frames.ProcessRequest{
		Executable:       "tr",
		Arguments:        []string{"a-z", "A-Z"},
		WorkingDirectory: "/",
		Environment:      map[string]string{"PATH": "/usr/bin:/bin"},
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Destroy(ctx)
	go func() {
		io.WriteString(p.Stdin(), "hello, procwire\n")
		p.Stdin().Close()
	}()
	out, _ := io.ReadAll(p.Stdout())
	status, _ := p.Wait(ctx)
	fmt.Printf("%s%v\n", out, status)
	// Output:
	// HELLO, PROCWIRE
	// exit status 0
}
