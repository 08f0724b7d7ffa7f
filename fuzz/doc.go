// Package fuzz holds the fuzz targets that exercise procwire's packages
// from outside, with their shared seed corpus in testdata/fuzz. It has no
// code of its own; run a target with, for example:
//
//	go test -run '^$' -fuzz '^FuzzDecode$' -fuzztime 1000000x ./fuzz
package fuzz
