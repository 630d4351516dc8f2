package auth

// Listening reports whether the revocation listener is connected: the
// cache serves tokens only then.
func (t *Tokens) Listening() bool { return t.live.Load() }
