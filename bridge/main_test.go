//go:build linux

package bridge

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	MaybeRunInit() // this binary is the init of ContainPIDNamespace's tests
	if os.Getenv(doomedEnv) != "" {
		doomedServer() // never returns
	}
	goleak.VerifyTestMain(m)
}
