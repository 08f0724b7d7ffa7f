// Package proxytest runs procwire behind real reverse proxies: its tests
// start nginx (Debian's nginx-light) and Caddy on loopback with the
// configurations of nginx.conf.tmpl and Caddyfile.tmpl, the ones
// docs/proxies.md gives, in front of two "procwire serve" processes built
// from this module, and stream, cut, reload and kill through them. Its
// benchmark compares the throughput through nginx with a direct connection
// in the same run.
//
// The package has no API; the templates are embedded by its tests. Without
// nginx or caddy their tests skip, except under CI=true, where they fail.
package proxytest
