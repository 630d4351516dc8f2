// Package console is the web console for the people around the agent:
// approvers decide proposals, operators settle the review queue, read an
// operation's timeline and work the dispatch stop button. It is served on
// the API listener under /console/, rendered on the server with
// html/template (every value is escaped; no JavaScript is needed).
//
// The console never holds a rule of its own: every read and every action
// calls the same function as the JSON API (api.Server's ApproveProposal,
// DenyProposal, ResolveOperation, RetryOperation, PauseDispatch, …; the
// ledger's reads; the reconciler's ReviewPage), scoped to the signed-in
// token's tenant and access scope (auth.Principal.Access), and shows
// errors in the API's words (api.ErrorOf).
//
// What must never happen:
//   - an agent token signs in: agents propose, people decide;
//   - a token is kept in the browser: the cookie (HttpOnly,
//     SameSite=Strict, Secure over TLS, also behind a proxy that ends it,
//     a session cookie) names a server-side session, whose id is stored
//     hashed; a session is trusted without asking the ledger on each
//     request, or outlives its sign-out, its expiry or its token's
//     revocation;
//   - a POST from another origin changes anything
//     (http.CrossOriginProtection, and the Referer when neither
//     Sec-Fetch-Site nor Origin is sent, guard every route);
//   - another tenant's object is shown, or answered differently from one
//     that does not exist;
//   - a character of params, a key, a reason, a summary or a supplier's
//     answer is hidden or reorders what is shown (a right-to-left
//     override, a zero-width space, a Hangul filler, a variation
//     selector): every value of text goes through package display, which
//     shows such characters as their JSON escapes, so what an approver
//     sees is what is approved;
//   - a refusal looks like a success: each item of a batch shows its own
//     result, and a proposal changed or decided elsewhere says so.
package console
