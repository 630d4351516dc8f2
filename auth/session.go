package auth

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultSessionLifetime is how long a console session lasts at most
// after sign-in, whatever the browser does.
const DefaultSessionLifetime = 8 * time.Hour

// sessionPrefix marks a console session id, so it is never taken for a
// token (and a token never for a session id).
const sessionPrefix = "als_"

const (
	sessionInsert = `INSERT INTO console_sessions (id_hash, token_id, expires_at)
VALUES ($1, $2, now() + $3::bigint * interval '1 microsecond')`

	// sessionsExpiredDelete removes the sessions that ended on their own;
	// each sign-in runs it, so the table holds only live sessions and
	// those of the last few hours.
	sessionsExpiredDelete = `DELETE FROM console_sessions WHERE expires_at <= now()`

	// sessionAuthenticate is tokenAuthenticate for a session: the
	// session unexpired, its token unrevoked.
	sessionAuthenticate = `SELECT k.id, k.name, k.tenant_id, t.name, k.role, coalesce(k.scope, '')
FROM console_sessions s JOIN api_tokens k ON k.id = s.token_id JOIN tenants t ON t.id = k.tenant_id
WHERE s.id_hash = $1 AND s.expires_at > now() AND k.revoked_at IS NULL`

	sessionDelete = `DELETE FROM console_sessions WHERE id_hash = $1`

	// sessionsOfTokenDelete ends every session of a revoked token.
	sessionsOfTokenDelete = `DELETE FROM console_sessions WHERE token_id = $1`
)

// StartSession begins a console session of p (a principal Authenticate
// returned) that lasts at most lifetime, and returns its secret id for the
// browser's cookie. Only the id's SHA-256 is stored: a leaked database
// holds no usable session. Expired sessions are deleted on the way.
func (t *Tokens) StartSession(ctx context.Context, p Principal, lifetime time.Duration) (string, error) {
	if lifetime <= 0 {
		return "", fmt.Errorf("auth: session lifetime %s must be positive", lifetime)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("auth: random session id: %w", err)
	}
	secret := sessionPrefix + base64.RawURLEncoding.EncodeToString(raw)
	h := hash(secret)
	err := pgx.BeginFunc(ctx, t.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sessionsExpiredDelete); err != nil {
			return fmt.Errorf("auth: delete expired sessions: %w", err)
		}
		if _, err := tx.Exec(ctx, sessionInsert, h[:], p.TokenID, lifetime.Microseconds()); err != nil {
			return fmt.Errorf("auth: start a session of %s: %w", p.Name, err)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return secret, nil
}

// Session returns the principal of the session secret names: one that
// has not expired, was not ended, and whose token is not revoked;
// otherwise ErrUnauthenticated. It asks the database on every call, as
// for people's tokens: nothing later re-checks a person's decision.
func (t *Tokens) Session(ctx context.Context, secret string) (Principal, error) {
	if !strings.HasPrefix(secret, sessionPrefix) {
		return Principal{}, ErrUnauthenticated
	}
	h := hash(secret)
	var p Principal
	err := t.pool.QueryRow(ctx, sessionAuthenticate, h[:]).Scan(&p.TokenID, &p.Name, &p.TenantID, &p.Tenant, &p.Role, &p.Scope)
	if errors.Is(err, pgx.ErrNoRows) {
		return Principal{}, ErrUnauthenticated
	}
	if err != nil {
		return Principal{}, fmt.Errorf("auth: look up session: %w", err)
	}
	return p, nil
}

// EndSession ends the session secret names (sign-out): from then on it
// authenticates nothing, in every process. Ending one that does not exist
// is not an error.
func (t *Tokens) EndSession(ctx context.Context, secret string) error {
	if !strings.HasPrefix(secret, sessionPrefix) {
		return nil
	}
	h := hash(secret)
	if _, err := t.pool.Exec(ctx, sessionDelete, h[:]); err != nil {
		return fmt.Errorf("auth: end session: %w", err)
	}
	return nil
}
