//go:build linux

package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/procwire/procwire/client"
	"github.com/procwire/procwire/frames"
	"github.com/procwire/procwire/internal/testkit/linkproxy"
	"github.com/procwire/procwire/server"
)

// linkPayload is the stdout one transfer moves: small, so that -benchtime
// 1x stays cheap (every workload crosses the 20 Mbit/s link twice).
const linkPayload = 2 << 20

// linkLatency is added one way on the link: a 20 ms round trip.
const linkLatency = 10 * time.Millisecond

var linkSeq atomic.Int64

// linkRequest is argv in the temporary directory with a plain PATH.
func linkRequest(argv []string) frames.ProcessRequest {
	return frames.ProcessRequest{
		Executable:       argv[0],
		Arguments:        slices.Clone(argv[1:]),
		WorkingDirectory: os.TempDir(),
		Environment:      map[string]string{"PATH": "/usr/local/bin:/usr/bin:/bin"},
	}
}

// workload is output of one shape.
type workload struct {
	name string
	data []byte
}

var linkWords = strings.Fields(`the a to of and in for is on that with this file function test error value
	result return session update agent tool call read write path line build package module import
	run done output input config server client process stream frame data bytes offset window credit`)

// ndjsonWorkload is ACP-shaped output: session/update notifications, agent
// message chunks and tool calls, as JSON lines.
func ndjsonWorkload(n int, r *rand.Rand) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		words := make([]string, 4+r.IntN(12))
		for j := range words {
			words[j] = linkWords[r.IntN(len(linkWords))]
		}
		text := strings.Join(words, " ")
		switch r.IntN(4) {
		case 0:
			fmt.Fprintf(&b, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_%08x","update":{"sessionUpdate":"tool_call","toolCallId":"call_%d","title":"Read %s.go","kind":"read","status":"pending","locations":[{"path":"/work/src/%s.go","line":%d}]}}}`+"\n",
				r.Uint32()&0xff, i, words[0], words[1], r.IntN(900))
		default:
			fmt.Fprintf(&b, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_%08x","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":%q}}}}`+"\n",
				r.Uint32()&0xff, text)
		}
	}
	return b.Bytes()[:n]
}

// logWorkload is build- and test-log-shaped text.
func logWorkload(n int, r *rand.Rand) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		w := linkWords[r.IntN(len(linkWords))]
		switch r.IntN(5) {
		case 0:
			fmt.Fprintf(&b, "[%3d%%] Building CXX object src/%s/CMakeFiles/%s.dir/%s_%d.cc.o\n", i%101, w, w, w, r.IntN(50))
		case 1:
			fmt.Fprintf(&b, "src/%s/%s.go:%d:%d: warning: unused variable '%s%d' [-Wunused-variable]\n", w, w, r.IntN(2000), r.IntN(80), w, r.IntN(9))
		case 2:
			fmt.Fprintf(&b, "go: downloading github.com/%s/%s v1.%d.%d\n", w, linkWords[r.IntN(len(linkWords))], r.IntN(30), r.IntN(10))
		case 3:
			fmt.Fprintf(&b, "ok  \tgithub.com/procwire/procwire/%s\t%d.%03ds\n", w, r.IntN(90), r.IntN(1000))
		default:
			fmt.Fprintf(&b, "=== RUN   Test%s%d/%s\n--- PASS: Test%s%d/%s (0.%02ds)\n", w, i, w, w, i, w, r.IntN(100))
		}
	}
	return b.Bytes()[:n]
}

func randomWorkload(n int, r *rand.Rand) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func linkWorkloads() []workload {
	r := rand.New(rand.NewPCG(1, 2))
	return []workload{
		{"ndjson", ndjsonWorkload(linkPayload, r)},
		{"logs", logWorkload(linkPayload, r)},
		{"random", randomWorkload(linkPayload, r)},
	}
}

// linkServer starts a procwire server behind a shaped link and returns the
// URL through the link.
func linkServer(b *testing.B, bitsPerSecond float64) string {
	srv, err := server.New(server.Config{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(b, err)
	hs := httptest.NewServer(srv)
	px, err := linkproxy.Start(hs.Listener.Addr().String(), linkproxy.Config{BitsPerSecond: bitsPerSecond, Latency: linkLatency})
	require.NoError(b, err)
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = px.Close()
		hs.Close()
	})
	return "ws://" + px.Addr() + "/"
}

// transfer runs cat file through url and returns the wall time and the
// CPU this process spent.
func transfer(b *testing.B, url, file string, size int, compress bool) (wall, cpu time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
	defer cancel()
	cpu0, start := CPUTime(), time.Now()
	p, err := client.Open(ctx, url, fmt.Sprintf("link-%d", linkSeq.Add(1)), linkRequest([]string{"cat", file}),
		&client.Options{Compress: compress})
	require.NoError(b, err)
	n, err := io.Copy(io.Discard, onlyReader{p.Stdout()})
	require.NoError(b, err)
	require.Equal(b, int64(size), n)
	wall, cpu = time.Since(start), CPUTime()-cpu0
	_, err = p.Wait(ctx)
	require.NoError(b, err)
	require.NoError(b, p.Destroy(ctx))
	return wall, cpu
}

// echoP50 writes small JSON lines to a remote cat through url and returns
// the median round trip.
func echoP50(b *testing.B, url string, compress bool) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), benchTimeout)
	defer cancel()
	p, err := client.Open(ctx, url, fmt.Sprintf("link-%d", linkSeq.Add(1)), linkRequest([]string{"cat"}),
		&client.Options{Compress: compress})
	require.NoError(b, err)
	defer func() { require.NoError(b, p.Destroy(ctx)) }()
	line := []byte(`{"jsonrpc":"2.0","method":"session/prompt","params":{"sessionId":"sess_1","prompt":[{"type":"text","text":"go on"}]}}` + "\n")
	got := make([]byte, len(line))
	samples := make([]time.Duration, 0, 15)
	for range cap(samples) {
		start := time.Now()
		_, err := p.Stdin().WriteContext(ctx, line)
		require.NoError(b, err)
		_, err = io.ReadFull(p.Stdout(), got)
		require.NoError(b, err)
		samples = append(samples, time.Since(start))
	}
	slices.Sort(samples)
	return samples[len(samples)/2]
}

// codecCost returns the CPU seconds per GiB of raw payload that framing w
// costs the sender (Append) and the receiver (Decode), compressed or not,
// as this process's CPU time (so other load on the machine does not count).
func codecCost(b *testing.B, w []byte, enc string) (send, recv float64) {
	const frame = 64 << 10
	const rounds = 8
	var lines [][]byte
	start := CPUTime()
	var buf []byte
	for round := range rounds {
		for off := 0; off < len(w); off += frame {
			buf = frames.Append(buf[:0], &frames.Stdout{Off: int64(off), Data: w[off:min(off+frame, len(w))], Enc: enc})
			if round == 0 {
				lines = append(lines, bytes.Clone(buf))
			}
		}
	}
	perGiB := func(d time.Duration) float64 { return d.Seconds() / (rounds * float64(len(w)) / (1 << 30)) }
	send = perGiB(CPUTime() - start)
	var d frames.Decoder
	start = CPUTime()
	for range rounds {
		for _, l := range lines {
			if _, err := d.Decode(l); err != nil {
				panic(err)
			}
		}
	}
	return send, perGiB(CPUTime() - start)
}

// BenchmarkLink moves ACP-shaped NDJSON, build-log-shaped text and random
// bytes through a shaped link (20 and 100 Mbit/s, 20 ms round trip), each
// without and with s2 compression in the same iteration, and reports per
// workload the MB/s of raw bytes delivered both ways (best of the
// iterations: run it with -benchtime 3x or more on a loaded machine) and
// their ratio (-speedup), this process's CPU per GiB of raw output (server, client and
// proxy together), the codec's own CPU per GiB on each side (send =
// server, recv = client), and the echo p50 of small frames with and
// without compression.
func BenchmarkLink(b *testing.B) {
	ws := linkWorkloads()
	dir := b.TempDir()
	for _, w := range ws {
		require.NoError(b, os.WriteFile(filepath.Join(dir, w.name), w.data, 0o644))
	}
	for _, rate := range []struct {
		name string
		bps  float64
	}{{"20Mbit", 20e6}, {"100Mbit", 100e6}} {
		b.Run(rate.name, func(b *testing.B) {
			url := linkServer(b, rate.bps)
			// The best wall time of each transfer over the iterations (a
			// loaded machine only ever slows one down), the CPU summed.
			wall := map[string]time.Duration{}
			cpu := map[string]time.Duration{}
			echoRaw, echoS2 := time.Duration(1<<62), time.Duration(1<<62)
			b.ResetTimer()
			for range b.N {
				for _, w := range ws {
					for _, compress := range []bool{false, true} {
						key := w.name + map[bool]string{false: "-raw", true: "-s2"}[compress]
						dw, dc := transfer(b, url, filepath.Join(dir, w.name), len(w.data), compress)
						if best, ok := wall[key]; !ok || dw < best {
							wall[key] = dw
						}
						cpu[key] += dc
					}
				}
				echoRaw = min(echoRaw, echoP50(b, url, false))
				echoS2 = min(echoS2, echoP50(b, url, true))
			}
			b.StopTimer()
			raw := float64(b.N) * linkPayload
			for _, w := range ws {
				mbps := func(k string) float64 { return linkPayload / 1e6 / wall[w.name+k].Seconds() }
				b.ReportMetric(mbps("-raw"), w.name+"-raw-MB/s")
				b.ReportMetric(mbps("-s2"), w.name+"-s2-MB/s")
				b.ReportMetric(mbps("-s2")/mbps("-raw"), w.name+"-speedup")
				b.ReportMetric(cpu[w.name+"-raw"].Seconds()/(raw/(1<<30)), w.name+"-raw-cpu-s/GiB")
				b.ReportMetric(cpu[w.name+"-s2"].Seconds()/(raw/(1<<30)), w.name+"-s2-cpu-s/GiB")
			}
			b.ReportMetric(float64(echoRaw.Microseconds())/1e3, "echo-raw-p50-ms")
			b.ReportMetric(float64(echoS2.Microseconds())/1e3, "echo-s2-p50-ms")
		})
	}
	b.Run("codec", func(b *testing.B) {
		for range b.N {
			for _, w := range ws {
				sr, rr := codecCost(b, w.data, "")
				ss, rs := codecCost(b, w.data, frames.EncS2)
				b.ReportMetric(sr, w.name+"-raw-send-cpu-s/GiB")
				b.ReportMetric(rr, w.name+"-raw-recv-cpu-s/GiB")
				b.ReportMetric(ss, w.name+"-s2-send-cpu-s/GiB")
				b.ReportMetric(rs, w.name+"-s2-recv-cpu-s/GiB")
			}
		}
	})
}
