package relay

// SetBeforeDelete installs a hook that runs between publishing a batch and
// deleting its rows, so tests can crash the relay exactly there.
func (r *Relay) SetBeforeDelete(f func() error) { r.beforeDelete = f }
