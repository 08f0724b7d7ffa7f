package server

import (
	"testing"

	"go.uber.org/goleak"
)

// childEnv names the child a test starts by running the test binary itself.
const childEnv = "PROCWIRE_SERVER_TEST_CHILD"

func TestMain(m *testing.M) {
	runAsChild()
	goleak.VerifyTestMain(m)
}
