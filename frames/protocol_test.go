package frames_test

import (
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/procwire/procwire/frames"
)

// TestWireConstants pins every wire constant against the numbers and names
// PROTOCOL.md states, so neither can change alone.
func TestWireConstants(t *testing.T) {
	b, err := os.ReadFile("../PROTOCOL.md")
	if err != nil {
		t.Fatal(err)
	}
	spec := string(b)
	num := func(s string) int64 {
		n, err := strconv.ParseInt(strings.ReplaceAll(s, ",", ""), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	mustContain := func(s string) {
		t.Helper()
		if !strings.Contains(spec, s) {
			t.Errorf("PROTOCOL.md does not say %q", s)
		}
	}

	// Subprotocol and revision.
	mustContain("subprotocol **`" + frames.Subprotocol + "`**")
	mustContain("| `wire_revision` | `" + frames.WireRevision + "` |")
	if frames.Subprotocol != "procwire.v1" || frames.WireRevision != "procwire.v1" {
		t.Errorf("subprotocol %q, wire revision %q", frames.Subprotocol, frames.WireRevision)
	}

	// The line limits table.
	limits := map[string]int64{"MaxFirstLine": frames.MaxFirstLine, "MaxLine": frames.MaxLine, "MaxData": frames.MaxData}
	row := regexp.MustCompile("(?m)^\\| `(Max\\w+)` \\| ([0-9,]+) ")
	seen := 0
	for _, m := range row.FindAllStringSubmatch(spec, -1) {
		want, ok := limits[m[1]]
		if !ok {
			t.Errorf("PROTOCOL.md limit %s has no constant", m[1])
			continue
		}
		seen++
		if got := num(m[2]); got != want {
			t.Errorf("%s: PROTOCOL.md says %d, frames says %d", m[1], got, want)
		}
	}
	if seen != len(limits) {
		t.Errorf("found %d of %d limits in PROTOCOL.md", seen, len(limits))
	}
	mustContain("`MaxData` (262,144)")
	mustContain("(1 ..= 262,144)")

	// The contract's bounds, as PROTOCOL.md words them.
	for _, c := range []struct {
		text string
		got  int64
	}{
		{"≤ 256 items", frames.MaxArguments},
		{"each ≤ 65,536 bytes", frames.MaxArgumentBytes},
		{"≤ 4,096 entries", frames.MaxEnvEntries},
		{"≤ 1,048,576 bytes of keys and values", frames.MaxEnvBytes},
		{"other strings | string | 1 ..= 4,096 bytes", frames.MaxStringBytes},
		{"[A-Za-z0-9._:-]{0,127}$", frames.MaxInstanceIDBytes - 1},
		{"requested stdout window, 1,024 ..= 1,073,741,824", frames.MinWindow},
		{"requested stdout window, 1,024 ..= 1,073,741,824", frames.MaxWindow},
	} {
		mustContain(c.text)
		m := regexp.MustCompile(`[0-9][0-9,]*`).FindAllString(c.text, -1)
		found := false
		for _, s := range m {
			if num(s) == c.got {
				found = true
			}
		}
		if !found {
			t.Errorf("%q does not state %d", c.text, c.got)
		}
	}

	// Every frame type has its section, and no section lacks a type.
	heads := regexp.MustCompile("(?m)^### `(\\w+)` \\((C→S|S→C)").FindAllStringSubmatch(spec, -1)
	var names []string
	for _, h := range heads {
		ty, ok := frames.ParseType(h[1])
		if !ok {
			t.Errorf("PROTOCOL.md frame %s is not a frames.Type", h[1])
			continue
		}
		if ty.FromClient() != (h[2] == "C→S") {
			t.Errorf("%s: direction %s disagrees with FromClient", h[1], h[2])
		}
		names = append(names, h[1])
	}
	for ty := frames.TypeOpen; ty <= frames.TypePong; ty++ {
		if !slices.Contains(names, ty.String()) {
			t.Errorf("type %s has no section in PROTOCOL.md", ty)
		}
	}

	// The decode error kinds of §8, in order.
	sec8 := spec[strings.Index(spec, "## 8. Decode errors"):]
	var kinds []frames.Kind
	for _, m := range regexp.MustCompile("(?m)^\\| `(\\w+)` \\|").FindAllStringSubmatch(sec8, -1) {
		kinds = append(kinds, frames.Kind(m[1]))
	}
	if !slices.Equal(kinds, frames.Kinds()) {
		t.Errorf("PROTOCOL.md §8 kinds %v, frames.Kinds() %v", kinds, frames.Kinds())
	}

	// Vocabularies.
	for _, s := range []frames.SignalName{frames.SIGINT, frames.SIGTERM, frames.SIGKILL} {
		mustContain("`" + string(s) + "`")
	}
	mustContain("`" + frames.SignalDelivered + "` or `" + frames.SignalAlreadyExited + "`")
	for _, c := range errorCodes {
		mustContain(c)
		if !frames.ErrorCode(c).Valid() {
			t.Errorf("%s not valid", c)
		}
	}
	for _, s := range exitSignalNames {
		if !strings.Contains(spec, " "+s+" ") && !strings.Contains(spec, "`"+s+" ") && !strings.Contains(spec, " "+s+"`") {
			t.Errorf("exit signal %s not in PROTOCOL.md", s)
		}
	}
	mustContain("`SIGRTMIN+n` with n in 0..32")
}
