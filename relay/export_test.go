package relay

// SetBeforeMark installs a hook that runs between publishing a batch and
// marking it, so tests can crash the relay exactly there.
func (r *Relay) SetBeforeMark(f func() error) { r.beforeMark = f }
