package proc

// Change says what a process's change notification is about; several may
// be set at once.
type Change uint8

const (
	// ChangeOutput: stdout or stderr grew, or stdout reached its EOF.
	ChangeOutput Change = 1 << iota
	// ChangeStdin: stdin bytes left the queue (written to the child's pipe
	// or discarded after it broke), or the pipe became full or writable,
	// outside any call of the consumer.
	ChangeStdin
	// ChangeStdinPushed: a PushStdin call wrote its bytes straight to the
	// pipe; the caller of PushStdin, who is told in that same call, can
	// re-read StdinConsumed when it returns.
	ChangeStdinPushed
	// ChangeExit: the exit was published.
	ChangeExit
	// ChangeMoreOutput, with ChangeOutput: the read that grew stdout took
	// all it asked for, so more output is likely waiting. A consumer then
	// leaves the sending to a goroutine of its own, so that reading the
	// child and sending its output overlap; without it, output arrives a
	// little at a time and the reader may send it at once.
	ChangeMoreOutput
)
