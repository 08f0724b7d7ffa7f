//go:build linux && !(mips || mipsle || mips64 || mips64le)

package initproc

// System call numbers the syscall package lacks, the same on every
// architecture since the tables were unified (Linux 5.1), but mips's:
// close_range(2), pidfd_open(2) and pidfd_send_signal(2).
const (
	sysCloseRange      = 436
	sysPidfdOpen       = 434
	sysPidfdSendSignal = 424
)
