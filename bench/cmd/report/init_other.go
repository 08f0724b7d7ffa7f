//go:build !linux

package main

// maybeRunInit does nothing: procwire's init is Linux's.
func maybeRunInit() {}
