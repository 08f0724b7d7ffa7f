package client

// SetBlockedHook sets a function called, with p's lock held, whenever a
// call of p is about to block: a read or Wait waiting for news, a write
// finding no credit, Signal and Destroy waiting for their answers.
func SetBlockedHook(p *Process, f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.testHookBlocked = f
}
