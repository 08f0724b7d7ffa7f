package fuzz

// Seeds.

// lifeSeeds reach each path: every step, every answer, every cut.
func lifeSeeds() [][]byte {
	// oa is the argument of stepOpen for instance inst and key (-1: none);
	// dk that of stepDestroyKey.
	oa := func(inst, key int) byte {
		for a := range 256 {
			if a%lifeInstances == inst && (a>>2)%(lifeKeys+1)-1 == key {
				return byte(a)
			}
		}
		panic("no argument")
	}
	dk := func(inst, key int) byte {
		for a := range 256 {
			if a%lifeInstances == inst && (a>>2)%lifeKeys == key {
				return byte(a)
			}
		}
		panic("no argument")
	}
	keyed0, keyed1 := oa(0, 0), oa(1, 1)
	s := func(steps ...byte) []byte { return steps }
	return [][]byte{
		// open, stdin, signal, stdin_close, destroy inside.
		s(stepOpen, 0, 0, 0, stepStdin, 0, 8, 0, stepSignal, 0, 1, 0, stepInnerDestroy, 0, 0, 0),
		s(stepOpen, 0, 0, 0, stepStdin, 0, 8, 0, stepStdinClose, 0, 0, 0, stepSignal, 0, 0, 0, stepSignal, 0, 4, 0),
		// A keyed open repeated before any stdin: opened again, 4001 for
		// the first connection; then stdin, and the repeat is refused.
		s(stepOpen, keyed0, 0, 0, stepReopen, 0, 0, 0, stepStdin, 0, 9, 0, stepReopen, 0, 0, 0),
		// A keyed open, stdin_close at 0, the connection cut, opened again:
		// the replay holds stdout_eof and the exit.
		s(stepOpen, keyed0, 0, 0, stepStdinClose, 0, 0, 0, stepCut, 0, 0, 0, stepReopen, 0, 0, 0),
		// A greeter: opened again with its greeting replayed, until an
		// ack of it shows the client had opened: then already open.
		s(stepOpen, keyed0, 1<<3, 0, stepReopen, 0, 0, 0, stepAck, 0, 0, 0, stepReopen, 0, 0, 0, stepResume, 0, 2, 0),
		s(stepOpen, keyed0, 1<<3|3, 0, stepCut, 0, 0, 0, stepReopen, 0, 0, 0, stepStdin, 0, 4|8, 2, stepSignal, 0, 1, 0),
		// Destroy by key with nothing under it, then an open with the key.
		s(stepDestroyKey, dk(0, 0), 0, 0, stepOpen, keyed0, 0, 0),
		// Destroy by key of a live process, then the open again, the
		// resume, the destroy by id and by key again.
		s(stepOpen, keyed1, 0, 0, stepDestroyKey, dk(1, 1), 0, 0, stepReopen, 0, 0, 0, stepResume, 0, 0, 0, stepDestroyID, 0, 0, 0, stepDestroyKey, dk(1, 1), 0, 0),
		// A keyed open cut right after it was sent, then opened again
		// (learning the token), destroyed by key.
		s(stepOpen, keyed0, 0, 2<<2, stepReopen, 0, 0, 0, stepDestroyKey, dk(0, 0), 0, 0),
		s(stepOpen, keyed0, 0, 2<<2, stepDestroyKey, dk(0, 0), 0, 0, stepOpen, keyed0, 0, 0),
		// A destroy by key cut after it was sent, then the open with the key.
		s(stepDestroyKey, dk(0, 0), 0, 2<<2, stepOpen, keyed0, 0, 0),
		// Open cut inside its frame; resume cut inside and after.
		s(stepOpen, 0, 0, 3<<2, stepOpen, 1, 0, 0, stepResume, 0, 0, 3<<2, stepResume, 0, 0, 2<<2, stepStdin, 0, 0, 0),
		// Resume with every offset, wrong token, made-up process.
		s(stepOpen, 0, 0, 0, stepStdin, 0, 40, 0, stepAck, 0, 0, 0, stepCut, 0, 0, 0,
			stepResume, 0, 2, 0, stepResume, 0, 4, 0, stepResume, 0, 6, 0, stepResume, 0, 8, 0, stepResume, 0, 1, 0, stepResume, 1, 0, 0),
		// Compression: s2 both ways, stdin compressed, forced, corrupt.
		s(stepOpen, 0, 3, 0, stepStdin, 0, 4|8, 2, stepStdin, 0, 4, 3, stepStdin, 0, 8, 4, stepStdin, 0, 0, 5),
		s(stepOpen, 0, 0, 0, stepStdin, 0, 4, 3),
		s(stepOpen, 0, 4, 0, stepStdin, 0, 4, 4),
		s(stepOpen, 0, 7, 0, stepStdin, 0, 4, 5|8),
		// A child whose signals fail: error.id, and the same answer again.
		s(stepOpen, 0, 2<<3, 0, stepSignal, 0, 0, 0, stepSignal, 0, 4, 0, stepStdin, 0, 3, 0, stepStdinClose, 0, 0, 0, stepSignal, 0, 0, 0),
		// A signal right after stdin not yet echoed: delivered after it.
		s(stepOpen, 0, 0, 0, stepStdin, 0, 4|0xf8, 0x40, stepSignal, 0, 0, 0),
		s(stepOpen, 0, 1<<3, 0, stepStdin, 0, 0xf8, 0x40, stepStdin, 0, 4|0xf8, 0x40, stepSignal, 0, 8, 0),
		// Signals cut off, then resumed and asked again.
		s(stepOpen, 0, 0, 0, stepStdin, 0, 8, 0, stepSignal, 0, 0, 0x80, stepResume, 0, 0, 0, stepSignal, 0, 4, 0, stepSignal, 0, 7, 0),
		// Stdin cut off after sending, then resumed.
		s(stepOpen, keyed0, 0, 0, stepStdin, 0, 16, 0x80, stepResume, 0, 0, 0, stepStdin, 0, 16, 0),
		s(stepOpen, keyed0, 0, 0, stepStdin, 0, 16, 0x80, stepReopen, 0, 0, 0, stepDestroyKey, dk(0, 0), 0, 0),
		// Stdin in fragments cut inside; at a wrong offset.
		s(stepOpen, 0, 0, 0, stepStdin, 0, 8, 7, stepResume, 0, 0, 0, stepStdin, 0, 8, 6),
		// Destroy by id from another connection while attached; cut; again.
		s(stepOpen, 0, 0, 0, stepDestroyID, 0, 0, 0, stepDestroyID, 0, 0, 0, stepResume, 0, 0, 0),
		s(stepOpen, 0, 0, 0, stepDestroyID, 0, 0, 2<<2, stepDestroyID, 0, 1, 0),
		// Malformed first frames.
		s(stepBadFirst, 0, 0, 0, stepBadFirst, 1, 0, 0, stepBadFirst, 2, 0, 0, stepBadFirst, 3, 0, 0),
		s(stepBadFirst, 4, 0, 0, stepBadFirst, 5, 0, 0, stepBadFirst, 6, 0, 0, stepBadFirst, 7, 0, 0, stepOpen, keyed0, 0, 0),
		// Wrong routing headers.
		s(stepOpen, 0, 0, 2, stepOpen, 0, 0, 0, stepResume, 0, 0, 2, stepResume, 0, 0, 3, stepDestroyID, 0, 0, 3, stepDestroyKey, 0, 0, 2),
		// Every instance, MaxProcesses reached, a start that fails, the
		// same instance twice.
		s(stepOpen, 0, 0, 0, stepOpen, 1, 0, 0, stepOpen, 2, 0, 0, stepOpen, 0, 0, 0, stepInnerDestroy, 0, 0, 0, stepOpen, 2, 3<<3, 0),
		// Inner destroys naming the process by id, by key, another one.
		s(stepOpen, keyed0, 0, 0, stepOpen, oa(2, -1), 0, 0, stepInnerDestroy, 0, 3, 0, stepInnerDestroy, 0, 2, 0),
		s(stepOpen, keyed0, 0, 0, stepOpen, oa(2, 2), 0, 0, stepInnerDestroy, 1, 1, 0, stepInnerDestroy, 0, 0, 0x80),
		s(stepOpen, keyed0, 0, 0, stepInnerDestroy, 0, 4, 0, stepResume, 0, 0, 0, stepInnerDestroy, 0, 5, 0, stepReopen, 0, 0, 0, stepInnerDestroy, 0, 6, 0),
		// The same key on two instances; instances reused after a destroy.
		s(stepOpen, oa(0, 1), 0, 0, stepOpen, oa(1, 1), 0, 0, stepDestroyKey, dk(0, 1), 0, 0, stepOpen, oa(0, 2), 0, 0, stepOpen, oa(0, 1), 0, 0, stepDestroyKey, dk(1, 1), 0, 0, stepOpen, oa(1, -1), 0, 0),
		// Acks: backwards, beyond; stdin_close elsewhere; stdin after close.
		s(stepOpen, 0, 0, 0, stepStdin, 0, 40, 0, stepAck, 0, 0, 0, stepAck, 0, 1, 0),
		s(stepOpen, 0, 0, 0, stepAck, 0, 2, 0),
		s(stepOpen, 0, 0, 0, stepStdinClose, 0, 3, 0),
		s(stepOpen, 0, 0, 0, stepStdinClose, 0, 0, 0, stepStdin, 0, 0, 0),
		// Races: the same open twice; an open and a destroy by its key.
		s(stepRace, dk(0, 0), 0, 0, stepStdin, 0, 8, 0, stepRace, dk(1, 1), 0, 0),
		s(stepRace, dk(0, 0), 1, 0, stepOpen, keyed0, 0, 0, stepDestroyKey, dk(0, 0), 0, 0, stepResume, 0, 0, 0),
		s(stepRace, dk(2, 1), 3, 0, stepOpen, oa(2, 1), 0, 0),
		s(stepRace, dk(0, 0), 4, 0, stepRace, dk(1, 1), 5, 0, stepRace, dk(2, 2), 7, 0, stepInnerDestroy, 0, 0, 0),
		s(stepRace, dk(0, 0), 12, 0, stepRace, dk(1, 1), 13, 0, stepStdin, 0, 8, 0),
		s(stepRace, dk(0, 0), 16|5, 0, stepRace, dk(1, 1), 16|7, 0, stepRace, dk(2, 2), 16|13, 0),
		// Signal id 0; a normal close and a cut.
		s(stepOpen, 0, 0, 0, stepSignal, 0, 6, 0),
		s(stepOpen, 0, 0, 0, stepCut, 0, 1, 0, stepResume, 0, 0, 0),
	}
}
