//go:build linux && (mips || mipsle)

package initproc

const sysCloseRange = 4000 + 436 // o32
