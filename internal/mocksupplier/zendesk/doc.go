// Package zendesk is a fake of the Zendesk Support (Ticketing) API's ticket creation and lookup,
// written from Zendesk's public documentation, for tests that run actledger against a real
// supplier's behaviour. It is a test double: no production code path of actledger may import it.
//
// # What it imitates, and where Zendesk says so
//
//   - Authentication with an API token as HTTP Basic "{email_address}/token:{api_token}", or
//     with an OAuth access token as "Authorization: Bearer …"
//     (https://support.zendesk.com/hc/en-us/articles/115000510267-Authentication-for-API-requests,
//     https://developer.zendesk.com/documentation/api-basics/authentication/using-the-api-with-2-factor-authentication-enabled).
//     API tokens are being retired: "Zendesk API tokens will be permanently deactivated on
//     April 30, 2027" (https://developer.zendesk.com/documentation/api-basics/authentication/oauth-migration/).
//     A request without valid credentials gets 401 {"error":"Couldn't authenticate you"}, the
//     body Zendesk answers (as reported at
//     https://support.zendesk.com/hc/en-us/articles/4408831452954-How-can-I-authenticate-API-requests).
//   - POST /api/v2/tickets.json with {"ticket":{"subject","comment":{"body"},"external_id",…}}:
//     "the only required property is comment"; the answer is 201 with {"ticket":{"id":<int>,
//     "url","external_id","subject","description","status",…},"audit":{…}} and a Location header
//     (https://developer.zendesk.com/api-reference/ticketing/tickets/tickets/,
//     https://developer.zendesk.com/api-reference/introduction/requests). Paths work with and
//     without .json. A ticket without a comment gets 422 {"error":"RecordInvalid",
//     "description","details"}.
//   - Idempotency for ticket creation: the Idempotency-Key header; the first answer carries
//     "x-idempotency-lookup: miss"; "if you repeat the same request using the same body and
//     idempotency key, another ticket is not created. Instead, you'll get the same response as
//     before that is cached under the idempotency key", with "x-idempotency-lookup: hit"; the
//     same key with another body answers 400 {"error":"IdempotentRequestError","description":
//     "Request parameters don't match the given idempotency key"}; "keys expire after two hours.
//     If a request with a duplicate key is sent two hours after the original request, the
//     request will create a new ticket"
//     (https://developer.zendesk.com/api-reference/ticketing/introduction/#idempotency).
//   - Lookup: GET /api/v2/tickets.json?external_id=X answers {"tickets":[…],"next_page",
//     "previous_page","count"}; "External ids don't have to be unique for each ticket. As a
//     result, the request may return multiple tickets with the same external id"
//     (https://developer.zendesk.com/api-reference/ticketing/tickets/tickets/#list-tickets).
//     Zendesk documents no lag for this endpoint; Config.LookupLag lets a test add one.
//     GET /api/v2/tickets/{id}.json shows one ticket (404 RecordNotFound otherwise).
//   - The cursor-based incremental ticket export, GET /api/v2/incremental/tickets/cursor.json
//     ?start_time=<unix>|cursor=<after_cursor>: the tickets created or changed since start_time,
//     a page at a time, {"tickets", "after_url", "after_cursor", "before_url", "before_cursor",
//     "end_of_stream"}; items changed within the minute before the request are left out
//     (https://developer.zendesk.com/api-reference/ticketing/ticket-management/incremental_exports/,
//     https://developer.zendesk.com/documentation/ticketing/managing-tickets/using-the-incremental-export-api).
//     Its rate limit (10 requests a minute) and the sideloads are not imitated.
//   - Rate limiting: 429 with a Retry-After header "that tells you how many seconds to wait"
//     (https://developer.zendesk.com/api-reference/introduction/rate-limits/), in plain text
//     ("Number of allowed API requests per minute exceeded", as reported at
//     https://support.zendesk.com/hc/en-us/community/posts/4600766234138); 503 with Retry-After,
//     which Zendesk documents as a database timeout or deadlock
//     (https://developer.zendesk.com/api-reference/introduction/requests).
//   - Webhooks: the event schema of Zendesk's event webhooks, {"type":"zen:event-type:
//     ticket.created","account_id","id","time","zendesk_event_version","subject":"zen:ticket:<id>",
//     "detail":{…,"external_id" and ids as strings},"event":{}}
//     (https://developer.zendesk.com/api-reference/webhooks/event-types/webhook-event-types/,
//     https://developer.zendesk.com/api-reference/webhooks/event-types/ticket-events), signed
//     as Zendesk signs: X-Zendesk-Webhook-Signature = base64(HMACSHA256(TIMESTAMP + BODY)) under
//     the webhook's signing secret, the timestamp in X-Zendesk-Webhook-Signature-Timestamp
//     (https://developer.zendesk.com/documentation/webhooks/verifying/). That scheme is none of
//     actledger's (actledger, stripe, github, standard): the recipe in docs/providers/zendesk.md
//     settles lost responses by key and lookup, and the fake's webhooks are there for a test of
//     a receiver that verifies Zendesk's scheme.
//   - Faults (Server.Fail), each on one ticket create: 429 or 503 with Retry-After before the
//     key is looked at; 409 for a key in flight; a connection dropped before the commit; a 500
//     after the commit, stored under the key; an answer held after the commit (a repeat meanwhile
//     gets 409); a connection dropped after the commit (the lost response).
//
// # The Go API
//
// New(Config) returns a Server, an http.Handler. Effects(reference) counts the tickets whose
// external_id is reference — the ground truth a test asserts "at most once" against — and
// Tickets returns them. Fail queues faults; PendingFaults shows what is left. SetLookupLag
// changes the lag; SetWebhook sets the webhook (URL, secret, delay, attempts); Deliveries shows
// what was sent. Requests records every request with its headers, Authorization included. Close
// stops webhook deliveries. Config.Now is the clock of timestamps, the lag and key retention.
//
// # What it does not imitate, and what it decides where Zendesk is silent
//
// Zendesk does not document what a request gets while another with the same key is still
// running: the fake answers 409, Zendesk's status for a conflict ("A 409 response indicates a
// conflict with the resource you're trying to create or update"), the worst case a client must
// handle. Nor does it document whether an answer other than 201 is cached under a key: the fake
// stores the answer of every request that reached the commit (its 201, or a faulty 500) and
// nothing for requests refused before it (422, 429, 503), so a corrected retry runs afresh. It
// compares bodies as JSON (key order and spacing do not count). It does not imitate: any endpoint
// but these, ticket updates, comments beyond the first, users, organizations, requesters given
// by email, custom fields, side-loading, cursor pagination, archived tickets (which List Tickets
// leaves out), the Search API and its indexing delay, rate limits by volume and their headers,
// Zendesk's webhook retry rules and circuit breaker (the fake retries any answer other than 2xx
// a few times within seconds), trigger-based webhooks with custom bodies, and password
// authentication. Error names other than RecordInvalid, RecordNotFound and
// IdempotentRequestError, and all error descriptions but the two quoted above, are the fake's
// own. All state is in memory.
package zendesk
