//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/procwire/procwire/conform"
)

func init() {
	register(&command{
		name:    "conform",
		args:    "[flags] URL",
		summary: "check that the server at URL speaks procwire.v1",
		help: `Run the procwire.v1 conformance cases against the server at URL and print a
table: each case, PASS / FAIL with the first deviation observed, quoted /
SKIP with the reason, and what it proves. Exit 0 only when no case failed.
Implement the wire (PROTOCOL.md), then run this against your server.

The cases start processes with sh, cat, wc, head and sleep; a case needing a
command the target lacks is a recorded skip. A case that waits out a
grace_ms or heartbeat_ms longer than ` + conform.SlowThreshold.String() + ` is a recorded skip unless
--slow. Every process a case opens is destroyed when it ends.`,
		run: conformCmd,
	})
}

// conformCmd runs "procwire conform".
func conformCmd(ctx context.Context, args []string, io *stdio) int {
	c := lookup("conform")
	fs := newFlags(c)
	var conn connFlags
	conn.define(fs)
	jsonFile := fs.String("json", "", "also write the report as JSON to `file` (\"-\": stdout, instead of the table)")
	var cases caseList
	fs.Var(&cases, "case", "run only the case `NAME` (repeatable; \"procwire conform --list\" names them)")
	list := fs.Bool("list", false, "list the cases and what each proves, and exit")
	slow := fs.Bool("slow", false, "wait out a grace or heartbeat longer than "+conform.SlowThreshold.String())
	prefix := fs.String("instance-prefix", "", "start every instance_id with `PREFIX` (default conform-<random>)")
	cwd := fs.String("cwd", defaultCwd, "working `directory` of the processes the cases start")
	caseTimeout := durationFlag{d: new(time.Duration)}
	*caseTimeout.d = conform.DefaultCaseTimeout
	fs.Var(caseTimeout, "case-timeout", "bound on one case")
	pos, _, status, ok := parse(c, fs, args, -1, io, 2)
	if !ok {
		return status
	}
	if *list {
		for _, ci := range conform.Cases() {
			fmt.Fprintf(io.out, "%-26s %s\n", ci.Name, ci.Proves)
		}
		return 0
	}
	if len(pos) != 1 {
		status, _ := usageFailure(c, io, 2, "want exactly one URL, got %d arguments", len(pos))
		return status
	}
	d, err := conn.newDialer(pos[0], io.err)
	if err != nil {
		fmt.Fprintf(io.err, "procwire conform: %v\n", err)
		return 1
	}
	defer d.close()
	u := *d.url
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	}
	rep, err := conform.Run(ctx, conform.Config{
		URL:              u.String(),
		Token:            d.token,
		Header:           d.opts.HTTPHeader,
		HTTPClient:       d.opts.HTTPClient,
		Cases:            cases,
		Slow:             *slow,
		InstancePrefix:   *prefix,
		WorkingDirectory: *cwd,
		CaseTimeout:      *caseTimeout.d,
		Revision:         versionString(),
		Progress: func(r conform.Result) {
			fmt.Fprintf(io.err, "%-26s %s (%v)\n", r.Name, strings.ToUpper(string(r.Outcome)), r.Duration.Round(time.Millisecond))
		},
	})
	if errors.Is(err, conform.ErrUnknownCase) {
		status, _ := usageFailure(c, io, 2, "%v", err)
		return status
	}
	if err != nil {
		fmt.Fprintf(io.err, "procwire conform: %v\n", err)
		return 1
	}
	if *jsonFile != "" {
		if err := writeReport(*jsonFile, rep, io.out); err != nil {
			fmt.Fprintf(io.err, "procwire conform: %v\n", err)
			return 1
		}
	}
	if *jsonFile != "-" {
		if err := rep.WriteTable(io.out); err != nil {
			return 1
		}
	}
	if !rep.OK() {
		return 1
	}
	return 0
}

// writeReport writes the JSON report to file, or to stdout for "-".
func writeReport(file string, rep *conform.Report, stdout io.Writer) error {
	if file == "-" {
		return rep.WriteJSON(stdout)
	}
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("--json: %w", err)
	}
	if err := rep.WriteJSON(f); err != nil {
		f.Close()
		return fmt.Errorf("--json: %w", err)
	}
	return f.Close()
}

// caseList is the repeatable --case flag.
type caseList []string

func (s *caseList) String() string { return strings.Join(*s, ",") }

func (s *caseList) Set(v string) error {
	*s = append(*s, v)
	return nil
}
