//go:build linux && (mips || mipsle)

package initproc

// o32's numbers of sysnum.go's calls.
const (
	sysCloseRange      = 4000 + 436
	sysPidfdOpen       = 4000 + 434
	sysPidfdSendSignal = 4000 + 424
)
