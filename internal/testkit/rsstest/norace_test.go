//go:build !race

package rsstest

const raceEnabled = false
