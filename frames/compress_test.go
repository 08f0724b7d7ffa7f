package frames_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/frames"
)

func TestCompressedRoundTrip(t *testing.T) {
	payload := ndjsonPayload(200)[:32<<10]
	for _, f := range []frames.Frame{
		&frames.Stdout{Off: 7, Data: payload, Enc: frames.EncS2},
		&frames.Stderr{Off: 0, Data: payload, Enc: frames.EncS2},
		&frames.Stdin{Off: 1 << 40, Data: payload, Enc: frames.EncS2},
	} {
		line := frames.Append(nil, f)
		require.Contains(t, string(line), `,"enc":"s2"}`)
		require.Less(t, len(line), len(payload)/2, "NDJSON compresses to less than half, base64 included")
		var d frames.Decoder
		got, err := d.Decode(line)
		require.NoError(t, err)
		require.True(t, frames.Equal(f, got))
		require.Equal(t, payload, dataOf(got))
	}
}

func dataOf(f frames.Frame) []byte {
	switch f := f.(type) {
	case *frames.Stdout:
		return f.Data
	case *frames.Stderr:
		return f.Data
	case *frames.Stdin:
		return f.Data
	}
	return nil
}

func TestCompressionSkippedWhenItDoesNotPay(t *testing.T) {
	random := make([]byte, 32<<10)
	_, _ = rand.Read(random)
	short := []byte(strings.Repeat("a", frames.MinCompress-1))
	for _, data := range [][]byte{random, short} {
		line := frames.Append(nil, &frames.Stdout{Data: data, Enc: frames.EncS2})
		require.Equal(t, frames.Append(nil, &frames.Stdout{Data: data}), line, "sent raw, without enc")
		f, err := frames.Decode(line)
		require.NoError(t, err)
		require.Empty(t, f.(*frames.Stdout).Enc)
	}
}

func TestDecoderMaxDataBoundsInflation(t *testing.T) {
	block := s2.Encode(nil, make([]byte, 1000))
	line := []byte(`{"type":"stdin","off":0,"data":"` + b64(block) + `","enc":"s2"}`)
	d := frames.Decoder{MaxData: 999}
	_, err := d.Decode(line)
	require.True(t, errors.Is(err, &frames.DecodeError{Frame: "stdin", Field: "data", Kind: frames.KindBadPayload}), "%v", err)
	d.MaxData = 1000
	f, err := d.Decode(line)
	require.NoError(t, err)
	require.Equal(t, make([]byte, 1000), f.(*frames.Stdin).Data)
	require.Equal(t, frames.EncS2, f.(*frames.Stdin).Enc)
}

// A block declaring 4 GiB is refused without allocating for it.
func TestBombAllocatesNothing(t *testing.T) {
	bomb := append(uvarint(0xffffffff), 0)
	line := []byte(`{"type":"stdout","off":0,"data":"` + b64(bomb) + `","enc":"s2"}`)
	var d frames.Decoder
	_, _ = d.Decode(line) // grow the Decoder's own buffers once
	allocs := testing.AllocsPerRun(20, func() {
		_, err := d.Decode(line)
		if !errors.Is(err, frames.ErrBadPayload) {
			t.Fatal(err)
		}
	})
	require.LessOrEqual(t, allocs, 4.0, "only the error value")
}

func TestEncListHas(t *testing.T) {
	require.True(t, frames.EncListHas("zstd,s2", frames.EncS2))
	require.False(t, frames.EncListHas("zstd,s22", frames.EncS2))
	require.False(t, frames.EncListHas("", frames.EncS2))
	require.True(t, bytes.Contains(frames.Append(nil, &frames.Open{InstanceID: "i", Request: frames.ProcessRequest{
		Executable: "cat", WorkingDirectory: "/"}, OutputEnc: "s2"}), []byte(`"output_enc":"s2"`)))
}
