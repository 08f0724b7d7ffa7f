// Package rsstest measures the resident memory of a "procwire serve" child
// under --max-memory, for the workloads that push a server's memory hardest:
// concurrent first frames at the line limit, clients that never read at the
// largest windows, stderr floods and window churn. Each case runs in a
// server process of its own, whose peak RSS (VmHWM in /proc/PID/status) is
// checked against the budget plus the fixed overhead serve states
// (README, "Memory").
//
// The package has no API. Its test is heavy (a few hundred MiB per case):
// it skips under -short, and .ci/run runs it.
package rsstest
