//go:build linux

package main

import (
	"fmt"
	"path"
	"strings"
)

// originList is serve's repeatable --allow-origin: the Origin host patterns
// (path.Match syntax, "host:port" or "scheme://host:port") accepted besides
// the request's own host, so that a page served from another origin (a
// browser client) may connect (PROTOCOL.md §1).
type originList []string

func (o *originList) String() string { return strings.Join(*o, ",") }

func (o *originList) Set(v string) error {
	if v == "" {
		return fmt.Errorf("an empty origin pattern")
	}
	if _, err := path.Match(v, ""); err != nil {
		return fmt.Errorf("origin pattern %q: %w", v, err)
	}
	*o = append(*o, v)
	return nil
}
