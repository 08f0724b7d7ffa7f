package server

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/procwire/procwire/bridge"
)

func TestMain(m *testing.M) {
	bridge.MaybeRunInit() // this binary is the init of the pid_namespace tests
	goleak.VerifyTestMain(m)
}
