//go:build linux && (mips64 || mips64le)

package initproc

const sysCloseRange = 5000 + 436 // n64
