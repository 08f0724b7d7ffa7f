// Package proxytest runs procwire behind a real reverse proxy: its tests
// start nginx (Debian's nginx-light, or any nginx on PATH) on loopback with
// the configuration of nginx.conf.tmpl, the one docs/proxies.md gives, in
// front of two "procwire serve" processes built from this module, and
// stream, cut, reload and kill through it. Its benchmark compares the
// throughput through nginx with a direct connection in the same run.
//
// The package has no API; nginx.conf.tmpl is embedded by its tests. Without
// nginx the tests skip, except under CI=true, where they fail.
package proxytest
