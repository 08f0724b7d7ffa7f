//go:build linux

package bridge

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	MaybeRunInit() // this binary is the init of ContainPIDNamespace's tests
	goleak.VerifyTestMain(m)
}
