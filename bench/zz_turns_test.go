package bench

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"testing"
	"time"
)

func snmp() map[string]int64 {
	out := map[string]int64{}
	for _, f := range []string{"/proc/net/snmp", "/proc/net/netstat"} {
		b, _ := os.ReadFile(f)
		lines := strings.Split(string(b), "\n")
		for i := 0; i+1 < len(lines); i += 2 {
			k, v := strings.Fields(lines[i]), strings.Fields(lines[i+1])
			for j := 1; j < len(k) && j < len(v); j++ {
				var n int64
				fmt.Sscan(v[j], &n)
				out[k[0]+k[j]] = n
			}
		}
	}
	return out
}

func TestZZTurns(t *testing.T) {
	if os.Getenv("ZZ") == "" {
		t.Skip()
	}
	ctx := context.Background()
	for _, ps := range peerStarters {
		p, err := ps.start()
		if err != nil {
			t.Fatal(err)
		}
		ss, err := openSessions(ctx, p, 200)
		if err != nil {
			t.Fatal(err)
		}
		f, _ := os.Create("/tmp/zz." + ps.name + ".prof")
		pprof.StartCPUProfile(f)
		before := snmp()
		total := 0
		c0, t0 := CPUTime(), time.Now()
		for b := 0; b < 30; b++ {
			all, err := roundTripsAtOnce(p, ss, 20)
			if err != nil {
				t.Fatal(err)
			}
			total += len(all)
		}
		el, cpu := time.Since(t0), CPUTime()-c0
		after := snmp()
		pprof.StopCPUProfile()
		f.Close()
		line := fmt.Sprintf("%s: %.0f RT/s %.1f cpu-us/RT;", ps.name, float64(total)/el.Seconds(), float64(cpu.Microseconds())/float64(total))
		for _, k := range []string{"Tcp:OutSegs", "Tcp:InSegs", "TcpExt:DelayedACKs", "TcpExt:TCPPureAcks", "TcpExt:TCPHPAcks", "TcpExt:TCPHPHits", "TcpExt:TCPAutoCorking", "TcpExt:TCPOrigDataSent"} {
			line += fmt.Sprintf(" %s=%.2f", k, float64(after[k]-before[k])/float64(total))
		}
		t.Log(line)
		closeSessions(ss)
		p.Close()
	}
}
