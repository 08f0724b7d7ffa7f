//go:build linux

package bridge

// MaybeRunInit must be called first in main (and in TestMain of a test
// that starts processes), before anything else runs. It marks the program
// as able to serve as the init of a process, which ContainPIDNamespace
// requires, and without which the other containments start the child
// directly, with weaker guarantees when the server dies (README,
// "Containment").
//
// A program re-executed as an init never reaches it: the init runs from
// the initialisation of package initproc, which the Go specification puts
// before that of the program's heavier packages, and exits there
// (initproc's doc). MaybeRunInit returns at once otherwise.
//
// The init starts the child in its own process group, sends that group the
// signals the server asks for on its control pipe (a guardian also
// forwards SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to
// its own pid; a PID namespace's init ignores them), reaps every
// process of the tree, reports the child's exit to the server, and exits
// when no other process is left. When the server closes the control pipe
// or dies, it kills every process of the tree first.
func MaybeRunInit() {
	initHooked.Store(true)
}
