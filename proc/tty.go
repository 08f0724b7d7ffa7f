package proc

// TTY asks for a child on a new pseudo-terminal: the child is the leader
// of a new session with the terminal's slave as its controlling terminal
// and as its stdin, stdout and stderr. Its stdout is everything the
// terminal writes (stdout and stderr merged); its stderr ends empty at
// once; its stdin is written to the terminal as keystrokes.
type TTY struct {
	// Rows and Cols are the initial window size in characters.
	Rows, Cols uint16
	// XPixel and YPixel are the initial window size in pixels; 0: unknown.
	XPixel, YPixel uint16
}
