package conform

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/coder/websocket"

	"github.com/procwire/procwire/frames"
)

// paddedAck is an ack of 0 padded with spaces inside the object to n bytes,
// ending in '\n' when nl.
func paddedAck(n int, nl bool) []byte {
	head, tail := `{"type":"ack","stdout":0`, "}"
	if nl {
		tail += "\n"
	}
	b := make([]byte, 0, n)
	b = append(b, head...)
	b = append(b, bytes.Repeat([]byte{' '}, n-len(head)-len(tail))...)
	return append(b, tail...)
}

func caseLineLimits(ctx context.Context, t *T) {
	p, o := t.open(ctx, t.instance(), t.request("cat"), openOptions{})
	if err := p.sendRaw(ctx, paddedAck(frames.MaxLine, true)); err != nil {
		t.Fatalf("a frame of MaxLine bytes: %v", err)
	}
	// The connection is still served: cat echoes stdin.
	if err := p.send(ctx, &frames.Stdin{Off: 0, Data: []byte("alive\n")}); err != nil {
		t.Fatalf("stdin: %v", err)
	}
	t.awaitState(ctx, p, "cat's echo after a frame of exactly MaxLine bytes", func() bool { return string(p.stdout) == "alive\n" })

	for _, c := range []struct {
		what string
		line []byte
	}{
		{fmt.Sprintf("a message of MaxLine (%d) bytes without its newline", frames.MaxLine), paddedAck(frames.MaxLine, false)},
		{fmt.Sprintf("a frame of MaxLine+1 (%d) bytes", frames.MaxLine+1), paddedAck(frames.MaxLine+1, true)},
	} {
		q, _ := t.resume(ctx, o, 6)
		_ = q.sendRaw(ctx, c.line) // the server may close while it is written
		t.expectClose(ctx, q, c.what, websocket.StatusMessageTooBig, func(f frames.Frame) bool { return f.Type() == frames.TypeCredit }, nil)
	}
	t.destroyFirst(ctx, o.ProcessID, o.Token)
}

// decodeSample is a line a server must refuse with 1007.
type decodeSample struct {
	what string
	line string
}

const (
	sampleID    = "0123456789abcdef0123456789abcdef"
	sampleToken = sampleID + sampleID
	sampleReq   = `"request":{"executable":"cat","arguments":[],"working_directory":"/","environment":{}}`
)

// firstFrameSamples break a first frame; none of them starts anything.
func firstFrameSamples(inst string) []decodeSample {
	return []decodeSample{
		{"an instance_id outside its pattern", `{"type":"open","instance_id":"bad id!",` + sampleReq + `}`},
		{"a negative offset", `{"type":"resume","process_id":"` + sampleID + `","token":"` + sampleToken + `","stdout_received":-1}`},
		{"a repeated key", `{"type":"destroy","process_id":"` + sampleID + `","process_id":"` + sampleID + `","token":"` + sampleToken + `"}`},
		{"a key differing in case", `{"type":"open","Instance_id":"` + inst + `",` + sampleReq + `}`},
		{"an unknown frame type", `{"type":"hello"}`},
		{"a NUL in an argument", `{"type":"open","instance_id":"` + inst + `","request":{"executable":"cat","arguments":["a\u0000b"],"working_directory":"/","environment":{}}}`},
		{"a bad environment key", `{"type":"open","instance_id":"` + inst + `","request":{"executable":"cat","arguments":[],"working_directory":"/","environment":{"1BAD":"x"}}}`},
		{"data after the object", `{"type":"destroy","process_id":"` + sampleID + `","token":"` + sampleToken + `"} x`},
		{"malformed JSON", `{"type":"open","instance_id":`},
	}
}

// sessionSamples break a frame inside a session.
var sessionSamples = []decodeSample{
	{"data that is not base64", `{"type":"stdin","off":0,"data":"@@@@"}`},
	{"a signal outside the vocabulary", `{"type":"signal","id":1,"signal":"SIGHUP"}`},
	{"a fractional integer", `{"type":"ack","stdout":1.5}`},
	{"an unknown field", `{"type":"ack","stdout":0,"extra":1}`},
}

// expectDecodeClose sends line on p and expects close 1007 with the reason
// the reference decoder gives: "<frame>.<field>: <kind>", optionally
// followed by ": " and a detail.
func (t *T) expectDecodeClose(ctx context.Context, p *peer, s decodeSample) {
	want := decodeReason(s)
	if err := p.sendRaw(ctx, []byte(s.line+"\n")); err != nil {
		t.Fatalf("%s: %v", s.what, err)
	}
	t.expectClose(ctx, p, fmt.Sprintf("%s (%s)", s.what, s.line), websocket.StatusInvalidFramePayloadData,
		func(f frames.Frame) bool { return f.Type() == frames.TypeCredit },
		func(r string) bool { return r == want || strings.HasPrefix(r, want+": ") })
}

// decodeReason is the close reason the reference decoder gives for s:
// "<frame>.<field>: <kind>".
func decodeReason(s decodeSample) string {
	_, err := frames.Decode([]byte(s.line + "\n"))
	de, ok := errors.AsType[*frames.DecodeError](err)
	if !ok {
		panic(fmt.Sprintf("conform: sample %q decodes", s.line))
	}
	return (&frames.DecodeError{Frame: de.Frame, Field: de.Field, Kind: de.Kind}).Error()
}

func caseDecodeErrors(ctx context.Context, t *T) {
	for _, s := range firstFrameSamples(t.instance()) {
		t.expectDecodeClose(ctx, t.dial(ctx, dialOptions{}), s)
	}
	p, o := t.open(ctx, t.instance(), t.request("cat"), openOptions{})
	for _, s := range sessionSamples {
		t.expectDecodeClose(ctx, p, s)
		p, _ = t.resume(ctx, o, 0)
	}
	t.destroyOn(ctx, p, o.ProcessID)
}

func caseProtocolErrors(ctx context.Context, t *T) {
	allowCredit := func(f frames.Frame) bool { return f.Type() == frames.TypeCredit }
	for _, line := range []string{`{"type":"ack","stdout":0}`, `{"type":"stdin_close","off":0}`} {
		p := t.dial(ctx, dialOptions{})
		if err := p.sendRaw(ctx, []byte(line+"\n")); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		t.expectClose(ctx, p, "the first frame "+line, websocket.StatusProtocolError, nil, nil)
	}
	p := t.dial(ctx, dialOptions{})
	if err := p.ws.Write(ctx, websocket.MessageBinary, frames.Append(nil, &frames.Destroy{ProcessID: sampleID, Token: sampleToken})); err != nil {
		t.Fatalf("binary message: %v", err)
	}
	t.expectClose(ctx, p, "a binary first message", websocket.StatusProtocolError, nil, nil)

	inst := t.instance()
	p, o := t.open(ctx, inst, t.request("cat"), openOptions{})
	steps := []struct {
		what string
		send func(p *peer) error
	}{
		{"a second open on the connection", func(p *peer) error {
			return p.send(ctx, &frames.Open{InstanceID: inst, Request: t.request("cat")})
		}},
		{"stdin at offset 5 when 0 bytes were received", func(p *peer) error {
			return p.send(ctx, &frames.Stdin{Off: 5, Data: []byte("x")})
		}},
		{"an ack of 100 when no stdout was sent", func(p *peer) error {
			return p.send(ctx, &frames.Ack{Stdout: 100})
		}},
		{"a binary message in a session", func(p *peer) error {
			return p.ws.Write(ctx, websocket.MessageBinary, frames.Append(nil, &frames.Ack{Stdout: 0}))
		}},
		{"a second resume on the connection", func(p *peer) error {
			return p.send(ctx, &frames.Resume{ProcessID: o.ProcessID, Token: o.Token})
		}},
	}
	for i, s := range steps {
		if i > 0 {
			p, _ = t.resume(ctx, o, 0)
		}
		if err := s.send(p); err != nil {
			t.Fatalf("%s: %v", s.what, err)
		}
		t.expectClose(ctx, p, s.what, websocket.StatusProtocolError, allowCredit, nil)
	}
	t.destroyFirst(ctx, o.ProcessID, o.Token)
}
