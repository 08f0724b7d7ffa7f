package proc

// Limits bound a process's whole tree. A zero field is no limit.
type Limits struct {
	// Pids is the most tasks (processes and threads) the tree may hold.
	Pids int64
	// Memory is the most memory, in bytes, the tree may use; reaching it
	// wakes the kernel's OOM killer in the tree only (with a cgroup), and
	// the process's exit says ReasonOOM.
	Memory int64
	// CPU is the most CPU time the tree may use, in cores (1.5: one and a
	// half cores' worth of time per period).
	CPU float64
}

// Tighten returns l with each limit that asked sets replaced by asked's,
// when tighter; asked's limits that l does not have are ignored.
func (l Limits) Tighten(asked Limits) Limits {
	if asked.Pids > 0 && l.Pids > 0 && asked.Pids < l.Pids {
		l.Pids = asked.Pids
	}
	if asked.Memory > 0 && l.Memory > 0 && asked.Memory < l.Memory {
		l.Memory = asked.Memory
	}
	if asked.CPU > 0 && l.CPU > 0 && asked.CPU < l.CPU {
		l.CPU = asked.CPU
	}
	return l
}
