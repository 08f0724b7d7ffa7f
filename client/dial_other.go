//go:build !js

package client

import (
	"net/http"

	"github.com/coder/websocket"
	"github.com/procwire/procwire/frames"
)

func (p *Process) dialOptions(h http.Header) *websocket.DialOptions {
	return &websocket.DialOptions{
		HTTPClient:   p.opts.HTTPClient,
		HTTPHeader:   h,
		Subprotocols: []string{frames.Subprotocol},
	}
}
func checkPlatform(*Options) error { return nil }
