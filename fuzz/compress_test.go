package fuzz

import (
	"bytes"
	"encoding/base64"
	"errors"
	"testing"

	"github.com/klauspost/compress/s2"

	"github.com/procwire/procwire/frames"
)

// uvarint is the S2 block header declaring n bytes.
func uvarint(n uint64) []byte {
	var b []byte
	for n >= 0x80 {
		b = append(b, byte(n)|0x80)
		n >>= 7
	}
	return append(b, byte(n))
}

// FuzzInflate: a compressed data frame carrying any block, under any
// max_data, never panics; it decodes exactly when the block inflates (as
// s2.Decode says) to 1..max_data bytes, to those bytes, and is otherwise
// refused as bad_payload; a frame that decodes re-encodes and decodes to
// the same payload. The seeds hold the bombs: a block declaring 4 GiB, one
// declaring and one inflating past max_data, truncated and corrupt blocks.
func FuzzInflate(f *testing.F) {
	text := bytes.Repeat([]byte(`{"jsonrpc":"2.0","method":"session/update"}`+"\n"), 40)
	good := s2.Encode(nil, text)
	f.Add(good, uint32(frames.MaxData))
	f.Add(good, uint32(len(text)-1))
	f.Add(good[:len(good)/2], uint32(frames.MaxData))
	f.Add(append(uvarint(0xffffffff), 0, 'a'), uint32(frames.MaxData))
	f.Add(append(uvarint(frames.MaxData+1), 0, 'a'), uint32(frames.MaxData))
	f.Add(s2.Encode(nil, make([]byte, frames.MaxData+1)), uint32(frames.MaxData))
	f.Add(s2.Encode(nil, make([]byte, 1000)), uint32(999))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, uint32(frames.MaxData))
	f.Add(uvarint(0), uint32(frames.MaxData))
	f.Add(append(uvarint(7), 2<<2, 'a', 'b', 'c', 1, 0), uint32(64))
	f.Add(append(uvarint(10), 2<<2, 'a', 'b', 'c', 1|3<<2, 3), uint32(64))
	f.Fuzz(func(t *testing.T, block []byte, limit uint32) {
		if len(block) == 0 || len(block) > frames.MaxData {
			return // the data rules of §2 come first; FuzzDecode covers them
		}
		line := []byte(`{"type":"stdout","off":0,"data":"` + base64.StdEncoding.EncodeToString(block) + `","enc":"s2"}`)
		d := frames.Decoder{MaxData: int(limit)}
		got, err := d.Decode(line)
		lim := int(limit)
		if lim <= 0 || lim > frames.MaxData {
			lim = frames.MaxData
		}
		n, lerr := s2.DecodedLen(block)
		var want []byte
		if lerr == nil && n >= 1 && n <= lim {
			want, lerr = s2.Decode(nil, block)
		}
		if lerr != nil || want == nil {
			if !errors.Is(err, &frames.DecodeError{Frame: "stdout", Field: "data", Kind: frames.KindBadPayload}) {
				t.Fatalf("a block s2 refuses (%v, %d bytes declared, limit %d) gave %v", lerr, n, lim, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("a block of %d bytes under limit %d refused: %v", len(want), lim, err)
		}
		so := got.(*frames.Stdout)
		if !bytes.Equal(so.Data, want) || so.Enc != frames.EncS2 {
			t.Fatalf("inflated to %d bytes, s2 says %d", len(so.Data), len(want))
		}
		again, err := frames.Decode(frames.Append(nil, &frames.Stdout{Data: want, Enc: frames.EncS2}))
		if err != nil || !bytes.Equal(again.(*frames.Stdout).Data, want) {
			t.Fatalf("re-encoded payload does not come back: %v", err)
		}
	})
}
