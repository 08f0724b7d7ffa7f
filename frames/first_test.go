package frames_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/frames"
)

// firstVector is one line of testdata/golden/first_subprotocol.json: a
// first message and the subprotocol that carries it in the upgrade
// (PROTOCOL.md §1), which the TypeScript client's encoder must produce.
type firstVector struct {
	Message     string `json:"message"`
	Subprotocol string `json:"subprotocol"`
}

const (
	sampleKey = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	sampleID  = "8f3a0c1e5b7d49a2b6c4e0f1a2b3c4d5"
)

func firstMessages() []frames.Frame {
	return []frames.Frame{
		&frames.Open{InstanceID: "inst-1", OpenKey: sampleKey, Request: frames.ProcessRequest{
			Executable: "/bin/echo", Arguments: []string{"héllo", "wörld"}, WorkingDirectory: "/tmp",
			Environment: map[string]string{"GREETING": "¡hola!", "PATH": "/usr/bin:/bin"},
		}},
		&frames.Resume{ProcessID: sampleID, Token: sampleID + sampleID, StdoutReceived: 4096, Pings: true},
		&frames.Destroy{InstanceID: "inst-1", OpenKey: sampleKey},
	}
}

func TestFirstSubprotocolFile(t *testing.T) {
	var vs []firstVector
	for _, f := range firstMessages() {
		require.NoError(t, frames.Validate(f))
		msg := frames.Append(nil, f)
		sub, ok := frames.FirstSubprotocol(msg)
		require.True(t, ok)
		back, ok := frames.FirstFromSubprotocols([]string{frames.Subprotocol + ", " + frames.SubprotocolFirst, sub})
		require.True(t, ok)
		require.Equal(t, msg, back)
		vs = append(vs, firstVector{Message: string(msg), Subprotocol: sub})
	}
	b, err := json.MarshalIndent(vs, "", "  ")
	require.NoError(t, err)
	checkGoldenFile(t, "first_subprotocol.json", append(b, '\n'))
}

func TestFirstFromSubprotocols(t *testing.T) {
	msg := []byte(`{"type":"destroy","process_id":"p"}` + "\n")
	sub, ok := frames.FirstSubprotocol(msg)
	require.True(t, ok)
	token := strings.TrimPrefix(sub, frames.FirstSubprotocolPrefix)
	for _, tc := range []struct {
		name    string
		offered []string
		ok      bool
	}{
		{"one header", []string{"procwire.v1, procwire.v1.first, " + sub}, true},
		{"several headers", []string{"procwire.v1", "procwire.v1.first", sub}, true},
		{"letter case of the names", []string{"procwire.v1, PROCWIRE.V1.FIRST, Procwire.First." + token}, true},
		{"no marker", []string{"procwire.v1, " + sub}, false},
		{"marker alone", []string{"procwire.v1, procwire.v1.first"}, false},
		{"two messages", []string{"procwire.v1.first, " + sub + ", " + sub}, false},
		{"padding", []string{"procwire.v1.first, " + sub + "="}, false},
		{"standard alphabet", []string{"procwire.v1.first, procwire.first.+/" + token}, false},
		{"stray bits", []string{"procwire.v1.first, procwire.first.QR"}, false},
		{"empty", []string{"procwire.v1.first, procwire.first."}, false},
		{"too long", []string{"procwire.v1.first, procwire.first." + strings.Repeat("QUFB", frames.MaxFirstSubprotocol/4)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := frames.FirstFromSubprotocols(tc.offered)
			require.Equal(t, tc.ok, ok)
			if ok {
				require.Equal(t, msg, got)
			}
		})
	}
	_, ok = frames.FirstSubprotocol(make([]byte, frames.MaxFirstSubprotocol))
	require.False(t, ok, "a message whose subprotocol would be over the bound is not offered")
	long, ok := frames.FirstSubprotocol(make([]byte, (frames.MaxFirstSubprotocol-len(frames.FirstSubprotocolPrefix))/4*3))
	require.True(t, ok)
	require.LessOrEqual(t, len(long), frames.MaxFirstSubprotocol)
	_, ok = frames.FirstFromSubprotocols([]string{frames.SubprotocolFirst, long})
	require.True(t, ok, "the longest subprotocol a client offers is accepted")
}

// FuzzFirstFromSubprotocols: whatever a request offers, the parse never
// panics, and what it takes is what a client's subprotocol carries.
func FuzzFirstFromSubprotocols(f *testing.F) {
	sub, _ := frames.FirstSubprotocol([]byte(`{"type":"destroy","process_id":"p"}` + "\n"))
	f.Add("procwire.v1, procwire.v1.first", sub)
	f.Add("procwire.v1.first", "procwire.first.=")
	f.Add("procwire.v1.first, procwire.first.", "PROCWIRE.FIRST.QUFB")
	f.Fuzz(func(t *testing.T, a, b string) {
		msg, ok := frames.FirstFromSubprotocols([]string{a, b})
		if !ok {
			return
		}
		if len(msg) == 0 || len(msg) > frames.MaxFirstSubprotocol {
			t.Fatalf("took %d bytes", len(msg))
		}
		again, ok := frames.FirstSubprotocol(msg)
		if !ok {
			t.Fatalf("took %q, which no client offers", msg)
		}
		if back, ok := frames.FirstFromSubprotocols([]string{frames.SubprotocolFirst, again}); !ok || string(back) != string(msg) {
			t.Fatalf("%q does not round-trip", msg)
		}
	})
}
