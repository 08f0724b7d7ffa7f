//go:build linux && !(mips || mipsle || mips64 || mips64le)

package initproc

// sysCloseRange is close_range(2)'s number, the same on every
// architecture since the tables were unified (Linux 5.1), but mips's.
const sysCloseRange = 436
