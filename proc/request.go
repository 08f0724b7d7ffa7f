package proc

// DefaultPath is the search path for an executable without a slash when the
// request's environment has no PATH. The server's own PATH is never used.
const DefaultPath = "/usr/local/bin:/usr/bin:/bin"

// Request describes the child to start.
type Request struct {
	// Executable is an absolute path, a path relative to WorkingDirectory
	// (when it contains a slash), or a name looked up in the request's PATH
	// (DefaultPath when the environment has none; empty and relative PATH
	// entries are relative to WorkingDirectory). It is also argv[0].
	Executable string
	// Arguments are argv[1:], passed exactly.
	Arguments []string
	// WorkingDirectory is the child's absolute working directory.
	WorkingDirectory string
	// Environment is the child's entire environment: nothing of the
	// server's own environment reaches the child.
	Environment map[string]string
}
