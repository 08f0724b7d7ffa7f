package client

// SetWriteBlockedHook sets a function called whenever a write of p's stdin
// finds no credit and is about to wait for some.
func SetWriteBlockedHook(p *Process, f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.testHookBlocked = f
}
