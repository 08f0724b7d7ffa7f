//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/procwire/procwire/client"
)

func init() {
	register(&command{
		name:    "attach",
		args:    "[flags] [HANDLE]",
		summary: "resume a process that exec --detach left running",
		help: `Take over the process a handle names, from any process on any machine that
reaches the server, within the server's grace after the detach: replay the
stdout nobody read, continue stdin from what the server received, and mirror
stderr, signals and the exit as exec does (same exit statuses). The handle
is what "procwire exec --detach" printed; give it with --handle-file (an
argument is visible to every user of this machine in ps). It is a secret:
whoever holds it, with the server's token, controls the process. A process
started with exec -t is attached as exec -t runs it: the local terminal raw
until attach ends, its size sent at once and on every SIGWINCH.`,
		run: attach,
	})
}

// handleSecret is the first field of every handle, so that it says what it
// is wherever it is pasted.
const handleSecret = "procwire process handle: a secret; whoever holds it (with the server's token) can read, write, signal and destroy the process"

// handleDoc is a handle as exec --detach prints it: one line of JSON that
// any language can read, naming the server and the process.
type handleDoc struct {
	Secret string `json:"secret"`
	URL    string `json:"url"`
	// URLMAC binds URL to the token the handle was made with
	// (handleMAC); absent when there was no token.
	URLMAC string `json:"url_mac,omitempty"`
	// TTY says that the process runs on a remote terminal (exec -t):
	// attach makes the local terminal raw, as exec -t does.
	TTY bool `json:"tty,omitempty"`
	client.Handle
}

// detach prints p's handle (to file, or w) and lets p go, leaving the
// process to the server's grace.
func detach(p *client.Process, d *dialer, file string, w io.Writer, out *exitReport) int {
	doc := handleDoc{Secret: handleSecret, URL: d.url.String(), TTY: d.opts.TTY != nil, Handle: p.Handle()}
	if d.token != "" {
		doc.URLMAC = handleMAC(d.token, doc.URL, doc.ProcessID)
	}
	b, err := json.Marshal(doc)
	if err == nil {
		b = append(b, '\n')
		if file != "" {
			err = writeSecret(file, b)
		} else {
			_, err = w.Write(b)
		}
	}
	if err != nil {
		dctx, cancel := context.WithTimeout(context.Background(), destroyTimeout)
		defer cancel()
		_ = p.Destroy(dctx)
		return out.failed(fmt.Errorf("write the handle: %w", err), exitFailure)
	}
	p.Detach()
	h := p.Handle()
	fmt.Fprintf(out.stderr, "procwire exec: detached process %s of instance %s; its handle is a secret; attach within the server's grace (%v)\n",
		h.ProcessID, h.InstanceID, msDuration(h.GraceMS))
	out.write("none")
	return 0
}

// writeSecret writes b to a new file only its owner can read, replacing
// what was at file without following it (writeFileReplacing).
func writeSecret(file string, b []byte) error {
	return writeFileReplacing(file, b, 0o600)
}

// readHandle parses a handle.
func readHandle(text string) (*handleDoc, error) {
	var h handleDoc
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return nil, fmt.Errorf("not a handle printed by procwire exec --detach: %w", err)
	}
	if h.URL == "" || h.ProcessID == "" || h.Token == "" || h.InstanceID == "" {
		return nil, errors.New("not a handle printed by procwire exec --detach: url, instance_id, process_id or token missing")
	}
	return &h, nil
}

// attach resumes a detached process and mirrors it.
func attach(ctx context.Context, args []string, io *stdio) int {
	c := lookup("attach")
	fs := newFlags(c)
	var cf connFlags
	cf.define(fs)
	handleFile := fs.String("handle-file", "", "read the handle from `file` (what exec --detach --handle-file wrote)")
	url := fs.String("url", "", "reach the server at `URL` instead of the one in the handle")
	statusFile := fs.String("exit-status-file", "", "write how the remote process ended to `file`: \"exit N\", \"signal NAME\", \"signal NAME REASON\" (such as \"signal SIGKILL oom\"), or \"none\" when attach's status is its own")
	pos, _, status, ok := parse(c, fs, args, -1, io, exitFailure)
	if !ok {
		return status
	}
	if (len(pos) == 0) == (*handleFile == "") || len(pos) > 1 {
		status, _ := usageFailure(c, io, exitFailure, "want one HANDLE, or --handle-file")
		return status
	}
	stderr := &lockedWriter{w: io.err}
	out := &exitReport{cmd: "attach", file: *statusFile, stderr: stderr}
	text := ""
	if len(pos) > 0 {
		text = pos[0]
	} else {
		b, err := os.ReadFile(*handleFile)
		if err != nil {
			return out.failed(fmt.Errorf("--handle-file: %w", err), exitFailure)
		}
		text = string(b)
	}
	h, err := readHandle(text)
	if err != nil {
		return out.failed(err, exitFailure)
	}
	bound := *url == "" // the handle's URL, checked against the token
	if bound {
		*url = h.URL
	}
	d, err := cf.newDialer(*url, stderr)
	if err != nil {
		return out.failed(err, exitFailure)
	}
	if bound {
		if err := checkHandleURL(h, d.token); err != nil {
			d.close()
			return out.failed(err, exitFailure)
		}
	}
	defer d.close()

	sigc := make(chan os.Signal, 8)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGPIPE)
	defer signal.Stop(sigc)

	var p *client.Process
	sig, err := interruptible(ctx, func(ctx context.Context) (err error) {
		p, err = client.Attach(ctx, d.dialURL(), h.Handle, d.opts)
		return err
	})
	if sig != 0 && err != nil {
		return out.failed(fmt.Errorf("%v before the process was attached", sig), 128+int(sig))
	}
	if err != nil {
		var re *client.RemoteError
		if errors.As(err, &re) {
			switch re.Frame.Actual {
			case "process_not_found", "process_expired", "process_destroyed":
				return out.failed(fmt.Errorf("process %s is gone (%s): attach within the server's grace after the detach", h.ProcessID, re.Frame.Actual), exitFailure)
			}
			return out.failed(fmt.Errorf("the server refused: %s", strings.TrimPrefix(re.Error(), "procwire: ")), exitFailure)
		}
		var pe *client.ProtocolError
		if errors.As(err, &pe) {
			return out.failed(err, exitFailure)
		}
		return out.failed(d.explain(err), exitFailure)
	}
	if h.TTY || p.TTY() {
		if fd := stdinTerminal(io.in); fd >= 0 {
			return out.mirrored(p, d.lost(mirrorTTY(ctx, p, sigc, io, stderr, fd, true)))
		}
		fmt.Fprintln(stderr, "procwire attach: warning: stdin is not a terminal: the remote terminal's output is copied as it is, stdin as bytes")
		return out.mirrored(p, d.lost(mirror(ctx, p, sigc, io.in, io.out, stderr, true)))
	}
	return out.mirrored(p, d.lost(mirror(ctx, p, sigc, io.in, io.out, stderr, false)))
}

// msDuration is a handle's milliseconds as a duration.
func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }
