package client

import "github.com/procwire/procwire/frames"

// Until frames carries open_key and error.id.
func setOpenKey(*frames.Open, string)                  {}
func hasOpenKey(*frames.Open) bool                     { return false }
func destroyByKeyFrame(o *frames.Open) *frames.Destroy { return &frames.Destroy{} }
func errorID(*frames.Error) int64                      { return 0 }
func setErrorID(*frames.Error, int64) bool             { return false }
