//go:build linux && (mips64 || mips64le)

package initproc

// n64's numbers of sysnum.go's calls.
const (
	sysCloseRange      = 5000 + 436
	sysPidfdOpen       = 5000 + 434
	sysPidfdSendSignal = 5000 + 424
)
