//go:build linux

package bridge

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestInitRunsBeforeHeavyPackages: a server binary re-executed as an init
// runs the init from package initproc's initialisation, before the
// packages a server needs and an init does not (encoding/json, net/http,
// this package) are initialised, which is most of what reaching main
// costs (initproc's doc; README, "Cold first byte"). The test runs its
// own binary, which links all three, with GODEBUG=inittrace=1 and reads
// the order the runtime initialised its packages in.
func TestInitRunsBeforeHeavyPackages(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	var order []string
	for line := range strings.Lines(string(out)) {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "init" {
			order = append(order, f[1])
		}
	}
	at := slices.Index(order, "github.com/procwire/procwire/bridge/internal/initproc")
	require.GreaterOrEqual(t, at, 0, "initproc has an init function, so the trace names it")
	for _, heavy := range []string{"encoding/json", "net/http", "github.com/procwire/procwire/bridge"} {
		i := slices.Index(order, heavy)
		require.GreaterOrEqual(t, i, 0, "%s is linked into this test and has an init function", heavy)
		require.Less(t, at, i, "initproc is initialised before %s", heavy)
	}
}
