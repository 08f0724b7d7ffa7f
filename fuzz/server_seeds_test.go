package fuzz

// Seeds.

// seed builds a program.
type seed []byte

func (s seed) op(op byte, args ...byte) seed { return append(append(s, op), args...) }

func serverSeeds() [][]byte {
	hdr := func(first byte, bits ...byte) seed {
		h := first
		for _, b := range bits {
			h |= b
		}
		return seed{h}
	}
	prep := func(first byte, n, read byte, windows byte) seed {
		return seed{first | hdrPrep | windows<<hdrWindowShift | read<<hdrPrepShift, n, 0}
	}
	// keep leaves the prepared process's connection open.
	keep := func(first byte, n, read byte) seed {
		return seed{first | hdrPrep | read<<hdrPrepShift, n, 1}
	}
	return [][]byte{
		// A polite session: stdin, echo, ack, stdin_close.
		hdr(firstOpen).op(opStdin, 9, 0).op(opSync).op(opAck, 0).op(opStdinClose, 0).op(opSync),
		// Wrong offsets, sizes over max_data, empty data.
		hdr(firstOpen).op(opStdin, 9, 0).op(opStdin, 4, 250),
		hdr(firstOpen).op(opStdin, 255, 0),
		hdr(firstOpen).op(opStdin, 200, 0),
		hdr(firstOpen).op(opStdinClose, 230),
		hdr(firstOpen).op(opStdinClose, 0).op(opStdinClose, 0).op(opStdin, 3, 0),
		// Acks backwards and beyond.
		hdr(firstOpen).op(opStdin, 99, 0).op(opSync).op(opAck, 0).op(opAck, 3|5<<3),
		hdr(firstOpen).op(opAck, 4),
		hdr(firstOpen).op(opAck, 7, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
		// Signals: repeats, zero, unknown names; a killed cat.
		hdr(firstOpen).op(opStdin, 50, 0).op(opSignal, 0, 1).op(opSignal, 1, 0).op(opSignal, 2, 2).op(opSync),
		hdr(firstOpen).op(opSignal, 3, 0),
		hdr(firstOpen).op(opSignal, 0, 3),
		// Destroy inside: plain, self, another, wrong token.
		hdr(firstOpen).op(opStdin, 10, 0).op(opDestroy, 0),
		hdr(firstOpen).op(opDestroy, 1),
		prep(firstOpenFail, 10, 1, 0).op(opDestroy, 2),
		hdr(firstOpen).op(opDestroy, 3),
		// Credit: exactly to the limit, then one byte past.
		hdr(firstOpen, 1<<hdrWindowShift).op(opBurst, 0).op(opSync).op(opBurst, 1),
		hdr(firstOpen, 3<<hdrWindowShift).op(opBurst, 1),
		// Framing: raw, binary, fragmented, oversized.
		hdr(firstOpen).op(opRaw, 5, 'h', 'e', 'l', 'l', 'o'),
		hdr(firstOpen).op(opRaw, 0x80),
		hdr(firstOpen).op(opBinary),
		hdr(firstOpen).op(opFragmented, 10, 30).op(opSync).op(opFragmented, 0, 0),
		hdr(firstOpen).op(opOversized, 0).op(opSync),
		hdr(firstOpen).op(opOversized, 1),
		hdr(firstOpen).op(opOversized, 2),
		// Mutated frames inside a session.
		hdr(firstOpen).op(opMutated, 0, 1, 128, 1).op(opMutated, 2, 2, 100, 2, 180, 4<<2|3),
		hdr(firstOpen).op(opSecondFirst, 0),
		prep(firstOpen, 5, 1, 0).op(opSecondFirst, 1, 0),
		// Ending: abrupt, clean, in the middle of stdin.
		hdr(firstOpen).op(opStdin, 100, 0).op(opAbrupt),
		hdr(firstOpen).op(opStdin, 100, 0).op(opSync).op(opAck, 4|2<<3).op(opAbrupt),
		hdr(firstOpen).op(opStdin, 100, 0).op(opCloseHandshake),
		// First frames that are refused.
		hdr(firstOpenGood),
		prep(firstOpenPrep, 0, 0, 0),
		prep(firstOpen, 0, 0, 0),
		hdr(firstOpenDenied),
		hdr(firstOpenFail).op(opStdin, 1, 0),
		// Resume of the prepared process: from what it holds, from the ack,
		// across a gap, beyond the end, with wrong credentials.
		prep(firstResume, 200, 2, 0).op(0<<2).op(opStdin, 20, 0).op(opSync).op(opGood, 10),
		prep(firstResume, 200, 2, 0).op(1<<2).op(opAck, 0),
		prep(firstResume, 200, 1, 0).op(2 << 2),
		prep(firstResume, 200, 3, 0).op(3 << 2),
		prep(firstResume, 200, 0, 0).op(7<<2|1<<5).op(opStdinClose, 0),
		prep(firstResume, 100, 1, 0).op(2),
		prep(firstResume, 100, 1, 0).op(3),
		prep(firstResume, 100, 1, 0).op(4<<2|2<<5, 0, 0, 0, 0, 0, 0, 0, 50, 0, 0, 0, 0, 0, 0, 0, 9),
		// Destroy of the prepared process as a first frame.
		prep(firstDestroy, 30, 1, 0).op(0),
		prep(firstDestroy, 30, 1, 0).op(2),
		prep(firstDestroy, 30, 1, 0).op(4),
		// Raw and mutated first frames.
		hdr(firstRaw).op(200, 9, '{', '"', 't', 'y', 'p', 'e', '"', ':', '1'),
		hdr(firstRaw).op(0, 1, 40, 1),
		prep(firstRaw, 10, 1, 0).op(1, 0).op(opStdin, 3, 0),
		prep(firstRaw, 10, 1, 0).op(2, 0),
		hdr(firstRaw).op(3, 0).op(opStdin, 3, 0),
		// The prepared process's connection still open: it is resumed
		// elsewhere (4001) or destroyed under it, while it sends stdin.
		keep(firstResume, 20, 1).op(0).op(opPrep, 5).op(opStdin, 4, 0).op(opPrep, 7).op(opSync),
		keep(firstResume, 20, 1).op(0).op(opStdin, 4, 0).op(opPrep, 0),
		keep(firstDestroy, 20, 1).op(0).op(opPrep, 9),
		keep(firstOpen, 20, 1).op(opPrep, 9).op(opPrep, 0).op(opDestroy, 2),
		keep(firstRaw, 20, 1).op(1, 0).op(opPrep, 3),
		// The well-behaved session while the hostile one floods it.
		hdr(firstOpen).op(opBurst, 0).op(opGood, 20).op(opSignal, 0, 2).op(opGood, 30),
	}
}
