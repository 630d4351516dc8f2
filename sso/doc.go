// Package sso signs people into the console with the organisation's
// identity provider (OpenID Connect, authorization code with PKCE), so
// that an approval names the person who looked at the order, not a
// token someone handed them.
//
// The providers file's access: section configures it (Section): the
// issuer and client, and the people rules, CEL over the verified ID
// token's claims, that give a person a tenant, a role (approver or
// operator, never agent or metrics) and optionally a scope; the first
// rule that matches decides, and a person no rule matches gets nothing.
// The identity provider is trusted to say who a person is (issuer and
// subject, email, name, groups); what they may do is this deployment's
// rules.
//
// The protocol is go-oidc's and x/oauth2's: discovery, the issuer's keys
// (a key the set does not hold makes go-oidc fetch the set again, so
// rotated keys are picked up), and the ID token's checks (signature,
// issuer, audience, expiry); this package adds what binds a sign-in to
// the browser that started it: a state used once and only from that
// browser, the nonce the ID token must carry, and the PKCE verifier, kept
// server-side in signin_pending so that any serve process can finish a
// sign-in another began.
package sso
