package bench

import (
	"time"

	"golang.org/x/sys/windows"
)

// CPUTime returns this process's user + kernel time so far.
func CPUTime() time.Duration {
	var created, exited, kernel, user windows.Filetime
	if err := windows.GetProcessTimes(windows.CurrentProcess(), &created, &exited, &kernel, &user); err != nil {
		return 0
	}
	// A FILETIME counts 100 ns.
	ticks := func(f windows.Filetime) int64 { return int64(f.HighDateTime)<<32 | int64(f.LowDateTime) }
	return time.Duration((ticks(kernel) + ticks(user)) * 100)
}

// ChildrenCPUTime is 0 on Windows, which keeps no account of the children
// a process waited for.
func ChildrenCPUTime() time.Duration { return 0 }
