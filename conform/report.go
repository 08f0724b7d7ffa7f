package conform

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/procwire/procwire/frames"
)

// ReportFormat names the layout of a JSON report (its JSON Schema is
// frames/schema/conform-report.v1.schema.json).
const ReportFormat = "procwire.conform.v1"

// Report is the outcome of a run: what ran against what, and every case's
// result. Its JSON form (WriteJSON) is evidence a provider can hand on:
// the body and the SHA-256 of the body's exact bytes.
type Report struct {
	Format     string // ReportFormat
	Target     string // the URL, without credentials
	Procwire   string // the procwire build that ran the cases
	GoVersion  string
	StartedAt  string // canonical UTC timestamps
	FinishedAt string
	// WireRevision and Evidence are the server's, from the first process
	// the run opened; Announced holds that opened's limits. All are nil
	// or empty when no process could be opened.
	WireRevision    string
	Evidence        *frames.Evidence
	Announced       *Announced
	MissingCommands []string // shell commands the target lacks
	Summary         Summary
	Cases           []Result
}

// Announced is what a server's opened announced.
type Announced struct {
	StdinLimit   int64 `json:"stdin_limit"`
	StdoutWindow int64 `json:"stdout_window"`
	StderrWindow int64 `json:"stderr_window"`
	GraceMS      int64 `json:"grace_ms"`
	HeartbeatMS  int64 `json:"heartbeat_ms"`
	ExitWaitMS   int64 `json:"exit_wait_ms"`
	MaxData      int64 `json:"max_data"`
}

// Summary counts the outcomes.
type Summary struct {
	Pass int `json:"pass"`
	Fail int `json:"fail"`
	Skip int `json:"skip"`
}

// OK reports whether no case failed.
func (r *Report) OK() bool { return r.Summary.Fail == 0 }

// Revision returns this build of procwire: the module's version, or its
// VCS revision when built from a checkout ("(devel)" when neither is
// known).
func Revision() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	v := bi.Main.Version
	if bi.Main.Path != "github.com/procwire/procwire" {
		v = ""
		for _, d := range bi.Deps {
			if d.Path == "github.com/procwire/procwire" {
				v = d.Version
			}
		}
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+dirty"
			}
		}
	}
	switch {
	case rev != "" && (v == "" || v == "(devel)"):
		return rev + modified
	case v != "":
		return v
	}
	return "(devel)"
}

// WriteTable writes the report as a table: case, what it proves, outcome
// with the first deviation or the reason; then the summary.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "CASE\tRESULT\tPROVES")
	for _, c := range r.Cases {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, strings.ToUpper(string(c.Outcome)), c.Proves)
		if c.Detail != "" {
			fmt.Fprintf(tw, "\t\t  %s\n", detailLine(c))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	wire := r.WireRevision
	if wire == "" {
		wire = "unknown"
	}
	_, err := fmt.Fprintf(w, "\n%d passed, %d failed, %d skipped against %s (wire %s) in %v\n",
		r.Summary.Pass, r.Summary.Fail, r.Summary.Skip, r.Target, wire, r.elapsed().Round(time.Millisecond))
	return err
}

// detailLine renders a result's detail: a failure's deviation quoted.
func detailLine(c Result) string {
	switch c.Outcome {
	case Fail:
		return fmt.Sprintf("deviation: %q", c.Detail)
	case Skip:
		return "skipped: " + c.Detail
	}
	return "note: " + c.Detail
}

func (r *Report) elapsed() time.Duration {
	a, err1 := frames.ParseTime(r.StartedAt)
	b, err2 := frames.ParseTime(r.FinishedAt)
	if err1 != nil || err2 != nil {
		return 0
	}
	return b.Sub(a)
}

// jsonEvidence is frames.Evidence with the wire's field names.
type jsonEvidence struct {
	WireRevision     string `json:"wire_revision"`
	Provider         string `json:"provider"`
	ProviderRevision string `json:"provider_revision"`
	InstanceID       string `json:"instance_id"`
	ProcessID        string `json:"process_id"`
	Executable       string `json:"executable"`
	WorkingDirectory string `json:"working_directory"`
	ArgumentsDigest  string `json:"arguments_digest"`
	StartedAt        string `json:"started_at"`
}

type jsonCase struct {
	Name       string  `json:"name"`
	Proves     string  `json:"proves"`
	Outcome    Outcome `json:"outcome"`
	Detail     string  `json:"detail,omitempty"`
	DurationMS int64   `json:"duration_ms"`
}

type jsonBody struct {
	Format          string        `json:"format"`
	Target          string        `json:"target"`
	Procwire        string        `json:"procwire_revision"`
	GoVersion       string        `json:"go_version"`
	StartedAt       string        `json:"started_at"`
	FinishedAt      string        `json:"finished_at"`
	WireRevision    string        `json:"wire_revision,omitempty"`
	Evidence        *jsonEvidence `json:"evidence,omitempty"`
	Announced       *Announced    `json:"announced,omitempty"`
	MissingCommands []string      `json:"missing_commands"`
	Summary         Summary       `json:"summary"`
	Cases           []jsonCase    `json:"cases"`
}

// jsonReport is the file: the body, and the SHA-256 of the body's bytes
// exactly as they appear in the file.
type jsonReport struct {
	Body       json.RawMessage `json:"body"`
	BodySHA256 string          `json:"body_sha256"`
}

// MarshalJSON returns the report's JSON form: {"body": {...},
// "body_sha256": "sha256:<hex>"}, where the digest is of the body's bytes
// as they appear in the output.
func (r *Report) MarshalJSON() ([]byte, error) {
	b := jsonBody{
		Format: r.Format, Target: r.Target, Procwire: r.Procwire, GoVersion: r.GoVersion,
		StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, WireRevision: r.WireRevision,
		Announced: r.Announced, MissingCommands: r.MissingCommands, Summary: r.Summary,
		Cases: make([]jsonCase, len(r.Cases)),
	}
	if b.MissingCommands == nil {
		b.MissingCommands = []string{}
	}
	if e := r.Evidence; e != nil {
		b.Evidence = &jsonEvidence{e.WireRevision, e.Provider, e.ProviderRevision, e.InstanceID,
			e.ProcessID, e.Executable, e.WorkingDirectory, e.ArgumentsDigest, e.StartedAt}
	}
	for i, c := range r.Cases {
		b.Cases[i] = jsonCase{c.Name, c.Proves, c.Outcome, c.Detail, c.Duration.Milliseconds()}
	}
	body, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	return json.Marshal(jsonReport{Body: body, BodySHA256: "sha256:" + hex.EncodeToString(sum[:])})
}

// WriteJSON writes the report's JSON form, indented for people; the
// digest covers the body's bytes as written.
func (r *Report) WriteJSON(w io.Writer) error {
	b, err := r.MarshalJSON()
	if err != nil {
		return err
	}
	var out bytes.Buffer
	// Indenting changes the body's bytes, so the digest is recomputed
	// over the indented body.
	var rep jsonReport
	if err := json.Unmarshal(b, &rep); err != nil {
		return err
	}
	var body bytes.Buffer
	if err := json.Indent(&body, rep.Body, "  ", "  "); err != nil {
		return err
	}
	sum := sha256.Sum256(body.Bytes())
	out.WriteString("{\n  \"body\": ")
	out.Write(body.Bytes())
	fmt.Fprintf(&out, ",\n  \"body_sha256\": \"sha256:%s\"\n}\n", hex.EncodeToString(sum[:]))
	_, err = w.Write(out.Bytes())
	return err
}

// ErrDigestMismatch is returned (wrapped) by VerifyReport for a report
// whose body does not hash to its body_sha256.
var ErrDigestMismatch = errors.New("conform: report body does not match body_sha256")

// VerifyReport checks that a JSON report's body_sha256 is the SHA-256 of
// its body's bytes as they appear in data.
func VerifyReport(data []byte) error {
	var rep jsonReport
	if err := json.Unmarshal(data, &rep); err != nil {
		return fmt.Errorf("conform: report: %w", err)
	}
	sum := sha256.Sum256(rep.Body)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != rep.BodySHA256 {
		return fmt.Errorf("%w: body hashes to %s, the report says %s", ErrDigestMismatch, got, rep.BodySHA256)
	}
	return nil
}
