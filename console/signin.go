package console

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"time"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/sso"
)

// pendingCookie holds the secret of a sign-in on its way through the
// identity provider (sso.Started.Browser): the callback is answered only
// in the browser that began it. SameSite=Lax, not Strict: the identity
// provider's redirect back is a cross-site navigation, which must carry
// it. It lives as long as the pending sign-in may.
const pendingCookie = "actledger_signin"

// maxSignInForm bounds the body of a sign-in's start.
const maxSignInForm = 4 << 10

// oauthErrorCode is the shape of an authorization error code.
var oauthErrorCode = regexp.MustCompile(`^[a-z_]{1,64}$`)

// ssoStart begins a sign-in with the identity provider: the browser is
// sent there with a state, a nonce and a PKCE challenge, and keeps the
// pending-sign-in cookie for the way back.
func (c *Console) ssoStart(w http.ResponseWriter, r *http.Request) {
	ctx, cancel, ok := c.ssoRequest(w, r)
	if !ok {
		return
	}
	defer cancel()
	// Anyone may start a sign-in: its form holds a return path at most.
	r.Body = http.MaxBytesReader(w, r.Body, maxSignInForm)
	started, err := c.cfg.SignIn.Begin(ctx, r.PostFormValue("return"))
	if errors.Is(err, sso.ErrIssuerDown) {
		c.log.WarnContext(ctx, "identity provider unreachable", "issuer", c.cfg.SignIn.Issuer(), "err", err)
		c.render(w, r, http.StatusServiceUnavailable, "signin", view{Title: "Sign in",
			Error: fmt.Sprintf("The identity provider (%s) cannot be reached right now, so signing in with your organisation does not work; a token still does.", c.cfg.SignIn.Issuer())})
		return
	}
	if errors.Is(err, sso.ErrTooManyPending) {
		c.log.WarnContext(ctx, "console sign-in refused: too many sign-ins under way", "issuer", c.cfg.SignIn.Issuer())
		w.Header().Set("Retry-After", "60")
		c.render(w, r, http.StatusServiceUnavailable, "signin", view{Title: "Sign in",
			Error: "Too many sign-ins are under way right now; try again in a few minutes. A token still signs in."})
		return
	}
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	http.SetCookie(w, cookieFor(r, pendingCookie, started.Browser, int(c.cfg.SignIn.PendingLifetime()/time.Second), http.SameSiteLaxMode))
	http.Redirect(w, r, started.AuthURL, http.StatusSeeOther)
}

// ssoCallback finishes a sign-in: the state must be one this browser
// began and not used yet, the ID token verified, and a people rule must
// admit the person; then a session of the person starts. Whatever goes
// wrong, no session is made and the page says what happened; neither the
// code nor any token is logged.
func (c *Console) ssoCallback(w http.ResponseWriter, r *http.Request) {
	ctx, cancel, ok := c.ssoRequest(w, r)
	if !ok {
		return
	}
	defer cancel()
	r = r.WithContext(ctx)
	q := r.URL.Query()
	ck, _ := r.Cookie(cookieName(r, pendingCookie))
	http.SetCookie(w, cookieFor(r, pendingCookie, "", -1, http.SameSiteLaxMode))
	refuse := func(status int, msg string) {
		c.render(w, r, status, "signin", view{Title: "Sign in", Error: msg})
	}
	if e := q.Get("error"); e != "" {
		// Only an OAuth error code is repeated (RFC 6749 §4.1.2.1: a
		// word of [a-z_]): anyone can make a link to this page, and its
		// words must not be theirs.
		if !oauthErrorCode.MatchString(e) {
			e = "an error"
		}
		c.log.WarnContext(ctx, "identity provider did not sign the person in", "issuer", c.cfg.SignIn.Issuer(), "error", e)
		refuse(http.StatusUnauthorized, fmt.Sprintf("The identity provider did not sign you in (%s); nothing changed.", e))
		return
	}
	if ck == nil || ck.Value == "" {
		refuse(http.StatusBadRequest, "No sign-in was started in this browser (or it took longer than ten minutes); nothing changed. Sign in again.")
		return
	}
	id, err := c.cfg.SignIn.Finish(ctx, ck.Value, q.Get("state"), q.Get("code"))
	switch {
	case errors.Is(err, sso.ErrNoPendingSignIn):
		c.log.WarnContext(ctx, "console sign-in refused: no pending sign-in for its state", "issuer", c.cfg.SignIn.Issuer())
		refuse(http.StatusBadRequest, "This sign-in was not started in this browser, was used already or expired; nothing changed. Sign in again.")
		return
	case errors.Is(err, sso.ErrIssuerDown):
		c.log.WarnContext(ctx, "identity provider unreachable", "issuer", c.cfg.SignIn.Issuer(), "err", err)
		refuse(http.StatusServiceUnavailable, fmt.Sprintf("The identity provider (%s) cannot be reached right now; a token still signs in.", c.cfg.SignIn.Issuer()))
		return
	case errors.Is(err, sso.ErrRefused):
		c.log.WarnContext(ctx, "console sign-in refused: the identity provider's answer did not verify", "issuer", c.cfg.SignIn.Issuer(), "err", err)
		refuse(http.StatusUnauthorized, "The identity provider's answer could not be verified, so you are not signed in; nothing changed.")
		return
	case err != nil:
		c.fail(w, r, nil, err)
		return
	}
	who := id.Email
	if who == "" {
		who = id.Subject
	}
	grant, ok, skipped := c.cfg.SignIn.Access().Match(id.Claims)
	for _, e := range skipped {
		c.log.WarnContext(ctx, "access rule could not be evaluated for a person", "issuer", id.Issuer, "subject", id.Subject, "err", e)
	}
	if !ok {
		c.log.WarnContext(ctx, "console sign-in refused: no access rule admits the person", "issuer", id.Issuer, "subject", id.Subject)
		refuse(http.StatusForbidden, fmt.Sprintf("You are signed in as %s at %s, but no rule of this deployment admits you; nothing changed. Ask whoever runs actledger to add you to access.people.", who, id.Issuer))
		return
	}
	if grant.Scope != "" {
		if err := auth.CheckScope(grant.Scope); err != nil {
			c.fail(w, r, nil, err)
			return
		}
	}
	tenantID, err := c.cfg.Ledger.EnsureTenant(ctx, grant.Tenant)
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	p := auth.Principal{TenantID: tenantID, Tenant: grant.Tenant, Role: auth.Role(grant.Role), Scope: grant.Scope,
		Person: &auth.Person{Issuer: id.Issuer, Subject: id.Subject, Email: id.Email, Name: id.Name}}
	expires := time.Now().Add(c.cfg.SessionLifetime)
	if id.Expiry.Before(expires) {
		expires = id.Expiry
	}
	session, err := c.cfg.Tokens.StartPersonSession(ctx, p, expires)
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	setSession(w, r, session)
	c.log.InfoContext(ctx, "console signed in", "tenant", p.Tenant, "role", p.Role, "scope", p.Scope,
		"issuer", id.Issuer, "subject", id.Subject, "rule", grant.Rule)
	// A page, not a redirect: this answer ends a navigation the identity
	// provider began, and a browser does not send a SameSite=Strict
	// cookie along a redirect from another site. The page's own
	// navigation is the console's, and carries it.
	c.render(w, r, http.StatusOK, "signedin", view{Title: "Signed in", Data: signedIn{Who: cmp.Or(id.Name, who), Next: id.ReturnTo}})
}

// ssoRequest bounds a sign-in request's work; without an access: section
// the sign-in routes are not there (404) and ok is false.
func (c *Console) ssoRequest(w http.ResponseWriter, r *http.Request) (context.Context, context.CancelFunc, bool) {
	if c.cfg.SignIn == nil {
		c.render(w, r, http.StatusNotFound, "error", view{Title: "Not found", Error: notFoundText})
		return nil, nil, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), c.cfg.RequestTimeout)
	return ctx, cancel, true
}

// signedIn is the page between the identity provider and the console.
type signedIn struct {
	Who, Next string
}
