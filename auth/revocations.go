package auth

import (
	"context"
	"encoding/hex"
	"time"
)

// RevocationChannel is the LISTEN/NOTIFY channel on which Revoke announces,
// in its own transaction, the hash of the token it ended: every process
// that caches tokens forgets it as soon as the revocation commits.
const RevocationChannel = "actledger_token_revoked"

// tokenRevokedNotify announces a revoked token's hash (hex; a hash, never
// the secret). It runs in Revoke's transaction, so it is delivered only if
// the revocation commits. Revocations are rare: the notify-queue lock it
// holds until the commit costs nothing that matters.
const tokenRevokedNotify = `SELECT pg_notify('` + RevocationChannel + `', encode($1::bytea, 'hex'))`

// revocationSettle is how long Revoke waits after its commit before it
// returns. Postgres hands the announcement to every listening connection
// at the commit, and a process evicts the token within about a millisecond
// of that; the wait covers that delivery on a loaded machine, so that a
// request sent once Revoke has returned (by `actledger token revoke`, say)
// finds the token gone in every running process, as the contract says:
// from then on it authenticates nothing. Revocations are rare; the wait
// costs nothing that matters.
const revocationSettle = 100 * time.Millisecond

// relistenAfter is the pause before listening again after the listening
// connection failed; meanwhile every request is checked in the database.
const relistenAfter = time.Second

// Listening reports whether the revocation listener is connected: the
// cache serves tokens only then.
func (t *Tokens) Listening() bool { return t.live.Load() }

// Start keeps this process's cache in step with revocations made by any
// process (`actledger token revoke` included): it listens on
// RevocationChannel and evicts each revoked token the moment its
// revocation commits. The cache serves tokens only while this listener is
// connected; before Start, after Stop and while the connection is lost,
// every request is checked in the database. It returns at once.
func (t *Tokens) Start(ctx context.Context) error {
	if t.cache == nil {
		return nil // nothing to keep in step
	}
	return t.svc.Start(ctx, func(ctx context.Context) {
		for ctx.Err() == nil {
			err := t.listenOnce(ctx)
			t.live.Store(false)
			t.cache.Clear()
			if ctx.Err() != nil {
				return
			}
			t.log.WarnContext(ctx, "lost the token revocation listener; checking every token in the database until it is back", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(relistenAfter):
			}
		}
	})
}

// Stop stops listening; from then on the cache serves nothing. It is safe
// to call more than once.
func (t *Tokens) Stop() {
	t.svc.Stop()
	t.live.Store(false)
}

func (t *Tokens) listenOnce(ctx context.Context) error {
	conn, err := t.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+RevocationChannel); err != nil {
		conn.Conn().PgConn().Close(context.WithoutCancel(ctx))
		return err
	}
	// A token revoked before LISTEN took effect was announced to nobody
	// here: start from an empty cache.
	t.cache.Clear()
	t.live.Store(true)
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			// The connection may hold a pending LISTEN; never return it.
			conn.Conn().PgConn().Close(context.WithoutCancel(ctx))
			return err
		}
		var key tokenHash
		if b, err := hex.DecodeString(n.Payload); err == nil && len(b) == len(key) {
			copy(key[:], b)
			t.cache.Evict(key)
		} else {
			t.cache.Clear() // not ours to read: forget everything
		}
	}
}
