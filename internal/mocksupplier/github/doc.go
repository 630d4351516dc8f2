// Package github is a fake of GitHub's REST API for opening issues, written from GitHub's public
// documentation, for tests that run actledger's GitHub recipe (docs/providers/github.md) against
// something that fails the way GitHub does. It is a test double: no production code path of
// actledger may import it.
//
// What it imitates, and where each fact comes from:
//
//   - POST /repos/{owner}/{repo}/issues with {"title", "body"?, "labels"?} answers 201 with the
//     issue (id, node_id, number, html_url, title, body, state "open", labels, user, …) and a
//     Location header. Its documented answers are 201, 400, 403, 404, 410 (issues disabled for
//     the repository), 422 ("Validation failed, or the endpoint has been spammed") and 503:
//     https://docs.github.com/rest/issues/issues#create-an-issue. The fake answers 400 "Problems
//     parsing JSON" or "Body should be a JSON object" and 422 Validation Failed with an errors
//     list for a missing or mistyped field, as
//     https://docs.github.com/rest/using-the-rest-api/troubleshooting-the-rest-api describes.
//   - No idempotency key: the endpoint documents none, so two identical requests make two issues
//     with two numbers. Whoever must find an issue after a lost answer has to carry a reference
//     in the request itself; actledger's recipe appends "actledger reference: <external key>" to
//     the body. Server.Effects counts issues by that reference.
//   - Credentials: "Authorization: Bearer <token>" or "Authorization: token <token>"
//     (https://docs.github.com/rest/authentication/authenticating-to-the-rest-api). A wrong token
//     answers 401 {"message":"Bad credentials","documentation_url":…}; no token answers 404
//     (GitHub does not confirm that a private repository exists; every fake repository is
//     private), except for search, below. An X-GitHub-Api-Version that does not exist answers
//     400; none means the default version.
//   - Rate limits (https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api):
//     every answer carries x-ratelimit-limit, -remaining, -used, -reset and -resource. Faults
//     answer the primary limit (403 with x-ratelimit-remaining: 0) and the secondary one (403 or
//     429 with retry-after and "You have exceeded a secondary rate limit…"), creating nothing.
//   - GET /search/issues?q=… answers {"total_count", "incomplete_results", "items"} with up to
//     1,000 results, per_page (at most 100) and page
//     (https://docs.github.com/rest/search/search). The query supports repo:, is:issue|pr|open|
//     closed, type:, state:, in:title,body,comments, words and "quoted phrases"
//     (https://docs.github.com/search-github/searching-on-github/searching-issues-and-pull-requests);
//     any other qualifier answers 422, so a test never takes an ignored filter for a match. A
//     repo: naming a repository that does not exist, or searched without a token, answers 422
//     Validation Failed, as the search documentation says for repositories the caller cannot
//     see. Search is the one read that lags: Config.LookupLag hides issues younger than it.
//     GitHub documents no bound for that lag; reports of it run from seconds to about ten
//     minutes (e.g. https://github.com/guettli/agentloop/issues/204).
//   - GET /repos/{owner}/{repo}/issues (list) and GET /repos/{owner}/{repo}/issues/{number}
//     answer at once, without lag. The list takes state, sort, direction, per_page (at most 100)
//     and page, and since, which "only show[s] results that were last updated after the given
//     time" (an ISO 8601 timestamp; the fake's issues are never updated after they are created);
//     a page followed by more has a Link header with rel="next"
//     (https://docs.github.com/rest/issues/issues#list-repository-issues,
//     https://docs.github.com/rest/using-the-rest-api/using-pagination-in-the-rest-api).
//     SetListOutages makes it answer 503, SetSearchTimeouts makes the search answer
//     incomplete_results: true with none of the matches it did not reach ("Timeouts and
//     incomplete results", https://docs.github.com/rest/search/search).
//   - Webhooks (Config.Webhook, SetWebhook): every new issue sends an "issues" event,
//     {"action":"opened","issue":{…},"repository":{…},"sender":{…}}, with X-GitHub-Event: issues,
//     X-GitHub-Delivery: <GUID>, User-Agent: GitHub-Hookshot/…, and, when the webhook has a
//     secret, X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body> and the older
//     X-Hub-Signature: sha1=<…> (https://docs.github.com/webhooks/webhook-events-and-payloads,
//     https://docs.github.com/webhooks/using-webhooks/validating-webhook-deliveries). GitHub
//     gives a receiver 10 seconds and does not redeliver a failed delivery by itself
//     (https://docs.github.com/webhooks/using-webhooks/handling-failed-webhook-deliveries); the
//     fake sends once unless WebhookConfig.Attempts asks for more, which models the redelivery
//     script GitHub suggests.
//
// For tests it adds what GitHub cannot give: Server.Effects, the ground truth of how many issues
// carry a reference whatever any client was told; a fault queue (SetFaults) consumed one per
// create request, with faults after commit (the connection dropped with no answer, a 500, a late
// answer) and before it (rate limits, 422, 401); Server.Requests, every request with its
// headers, so a test can prove a credential went only where it should; and Server.Deliveries,
// every webhook attempt with its headers and body.
//
// What it does not imitate: pull requests (every item is an issue), closing, editing or
// commenting, assignees and milestones (accepted fields are title, body and labels; labels are
// created on first use, whereas GitHub silently drops them for a token without push access),
// permissions of the token beyond right or wrong, the failed-login lockout, the User-Agent
// requirement, real rate-limit accounting (the headers are fixed unless a fault says otherwise),
// GitHub's tokenised search ranking (a term matches as a case-insensitive substring; results come
// newest first), incomplete_results (always false), the ten-second cut-off of slow requests,
// redirects for renamed repositories, media types other than JSON, webhook payloads other than
// "issues" "opened", form-encoded deliveries, and the many headers and fields of GitHub's answers
// that no recipe reads. Message texts the documentation does not quote are the fake's own.
//
// Everything lives in memory behind one mutex, but for the records of requests and of webhook
// deliveries, which keep their own.
package github
