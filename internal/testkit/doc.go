// Package testkit holds the repository's test tools, apart from the runtime
// packages beside it in internal/ (chunk, coalesce, link, size):
//
//   - cutproxy: a loopback TCP proxy that cuts connections on demand (the
//     client's tests, internal/testkit/proxytest and "procwire demo");
//     cmd/cutproxy drives it over stdin for the TypeScript tests.
//   - fakeexec: a platform-neutral executor, an in-memory cat with hooks,
//     for the server, client and fuzz tests.
//   - servertest: the server tests' helpers that the fuzz harness shares.
//   - stubborn and cmd/stubbornserve: processes whose first destroy fails.
//   - isoprobe: the isolation tests' probe process (Linux).
//   - linkproxy: a wide-area link on loopback, for BenchmarkLink.
//   - proxytest, rsstest: tests of serve behind nginx and Caddy, and of its
//     peak RSS.
//
// Nothing here is public API. Only "procwire demo" uses one of these tools
// outside the tests (cutproxy), on purpose: it demonstrates a resume across
// a real connection loss.
package testkit
