package conform

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/coder/websocket"

	"github.com/procwire/procwire/frames"
)

// acpLine is one line of ACP-shaped NDJSON: what compression is for.
const acpLine = `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"compressible output "}}}}` + "\n"

func caseCompression(ctx context.Context, t *T) {
	// Offered in both directions, with a name of a later revision first:
	// the server must ignore it and choose s2 or nothing.
	p, o := t.open(ctx, t.instance(), t.request("cat"), openOptions{outputEnc: "zz9," + frames.EncS2, stdinEnc: "zz9," + frames.EncS2})
	for _, c := range []struct{ dir, got string }{{"output_enc", o.OutputEnc}, {"stdin_enc", o.StdinEnc}} {
		if c.got != "" && c.got != frames.EncS2 {
			t.Fatalf("opened.%s is %q, which the open did not list as usable (it listed zz9 and s2)", c.dir, c.got)
		}
	}
	if o.OutputEnc == "" && o.StdinEnc == "" {
		t.destroyOn(ctx, p, o.ProcessID)
		t.Skipf("the server chose no compression in either direction (optional, PROTOCOL.md §5 \"Compression\")")
	}

	// Compressible stdin, in frames the client compresses where it may;
	// cat must see, and echo, exactly the raw bytes, and every offset and
	// the credit count raw bytes.
	want := bytes.Repeat([]byte(acpLine), int(min(o.MaxData, 32<<10))/len(acpLine))
	var off int64
	for range 4 {
		if err := p.send(ctx, &frames.Stdin{Off: off, Data: want, Enc: o.StdinEnc}); err != nil {
			t.Fatalf("stdin at %d: %v", off, err)
		}
		off += int64(len(want))
	}
	if err := p.send(ctx, &frames.StdinClose{Off: off}); err != nil {
		t.Fatalf("stdin_close: %v", err)
	}
	t.awaitEOFAndExit(ctx, p)
	if got := int64(len(p.stdout)); got != off || !bytes.Equal(p.stdout, bytes.Repeat(want, 4)) {
		t.Fatalf("cat echoed %d bytes that differ from the %d raw bytes sent (stdin_enc %q, output_enc %q)", got, off, o.StdinEnc, o.OutputEnc)
	}
	if o.OutputEnc != "" && p.compressed == 0 {
		t.Notef("output_enc %s chosen, but none of %d bytes of NDJSON output came compressed (allowed: the sender decides per frame)", o.OutputEnc, off)
	}
	t.destroyOn(ctx, p, o.ProcessID)

	// A payload that does not inflate is bad_payload (1007), where the
	// server accepts s2; enc where it chose none is a protocol error (1002).
	q, qo := t.open(ctx, t.instance(), t.request("cat"), openOptions{stdinEnc: o.StdinEnc})
	corrupt := base64.StdEncoding.EncodeToString([]byte{0xff, 0xff, 0xff, 0x0f, 'x', 'y', 'z'}) // declares far more than max_data
	line := fmt.Sprintf(`{"type":"stdin","off":0,"data":"%s","enc":"s2"}`+"\n", corrupt)
	if err := q.sendRaw(ctx, []byte(line)); err != nil {
		t.Fatalf("stdin: %v", err)
	}
	allow := func(f frames.Frame) bool { return f.Type() == frames.TypeCredit }
	if qo.StdinEnc == frames.EncS2 {
		t.expectClose(ctx, q, "a stdin block declaring more than max_data", websocket.StatusInvalidFramePayloadData, allow,
			func(r string) bool { return strings.Contains(r, string(frames.KindBadPayload)) })
	} else {
		t.expectClose(ctx, q, "stdin with enc where opened chose no stdin_enc", websocket.StatusProtocolError, allow, nil)
	}
	t.destroyFirst(ctx, qo.ProcessID, qo.Token)
}
