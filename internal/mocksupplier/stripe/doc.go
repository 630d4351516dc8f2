// Package stripe is a fake of Stripe's PaymentIntents and Refunds API (API v1), written from
// Stripe's public documentation, for tests that run actledger against a real supplier's
// behaviour: its credentials, its form encoding, its idempotency layer, its lagging search and
// its signed webhooks. It is a test double: no production code path of actledger may import it.
//
// # What it imitates, and where Stripe says so
//
//   - Requests are application/x-www-form-urlencoded with nested keys (metadata[reference]=…);
//     answers are JSON; the base URL is https://api.stripe.com
//     (https://docs.stripe.com/api). A parameter the endpoint does not take is refused with 400
//     parameter_unknown (https://docs.stripe.com/error-codes), so a wrongly nested key shows.
//   - Authentication with the secret key as "Authorization: Bearer sk_test_…" or as the HTTP
//     Basic username with no password; test keys start with sk_test_ and live keys with
//     sk_live_ (https://docs.stripe.com/api/authentication). Without a valid key every request
//     is refused with 401 and {"error":{"type":"invalid_request_error","message":…}}, the type
//     being one of Stripe's four error types (https://docs.stripe.com/api/errors).
//   - Errors as {"error":{"type","code","message","param","decline_code","payment_intent"}},
//     with the documented statuses: 400, 401, 402 ("the parameters were valid but the request
//     failed"), 404, 409 ("the request conflicts with another request (perhaps due to using the
//     same idempotent key)"), 429, 5xx (https://docs.stripe.com/api/errors), and codes from
//     https://docs.stripe.com/error-codes (parameter_missing, parameter_unknown,
//     parameter_invalid_integer, resource_missing, card_declined, amount_too_large,
//     charge_already_refunded, rate_limit, idempotency_key_in_use).
//   - POST /v1/payment_intents and the PaymentIntent object: id pi_…, object, amount,
//     currency, status, metadata, latest_charge, client_secret, livemode…; confirm=true
//     confirms in the same call (https://docs.stripe.com/api/payment_intents/create,
//     https://docs.stripe.com/api/payment_intents/object). GET /v1/payment_intents/{id}, and
//     GET /v1/payment_intents, the list (https://docs.stripe.com/api/payment_intents/list).
//   - POST /v1/refunds (payment_intent or charge, amount, reason, metadata), the Refund object
//     (id re_…, status), GET /v1/refunds[?payment_intent=…|charge=…] and GET /v1/refunds/{id}
//     (https://docs.stripe.com/api/refunds, https://docs.stripe.com/api/refunds/object). Both
//     lists are newest first, filtered by created[gte], created[gt], created[lte] and
//     created[lt] in unix seconds, paged by limit (1 to 100, default 10), has_more and
//     starting_after, the id of the previous page's last object
//     (https://docs.stripe.com/api/refunds/list, https://docs.stripe.com/api/pagination).
//     Metadata limits: 50 keys, names up to 40 characters, values up to 500
//     (https://docs.stripe.com/api/metadata).
//   - Idempotency: the Idempotency-Key header (at most 255 characters). The status and body of
//     the first request are saved once execution begins, "including 500 errors", and a repeat
//     with the same key gets them; the layer compares the endpoint and parameters with the
//     original and answers an idempotency_error otherwise; a request that fails validation or
//     conflicts with one executing concurrently is not saved; keys are removed once they are at
//     least 24 hours old, and a reuse after that is a new request
//     (https://docs.stripe.com/api/idempotent_requests). A replayed answer carries
//     "Idempotent-Replayed: true"; rate limiters run before the idempotency layer, so a 429 can
//     answer a repeat whose result is stored (https://docs.stripe.com/error-low-level). A
//     repeat while the first request still runs gets 409 idempotency_key_in_use ("the
//     idempotency key provided is currently being used in another request",
//     https://docs.stripe.com/error-codes).
//   - Search: GET /v1/payment_intents/search?query=… answers
//     {"object":"search_result","url","has_more","data","next_page"}; the query language's
//     clauses (field:value, metadata['key']:'value' or metadata["key"]:"value", AND or OR but
//     not both, up to 10 clauses, a leading minus to negate, null for presence, numeric
//     comparisons on amount and created); token fields such as metadata match exactly but
//     ignoring case
//     (https://docs.stripe.com/search). Search is not read-after-write: "under normal operating
//     conditions, data is searchable in less than a minute. Occasionally, propagation of new or
//     updated data can be up to an hour behind during outages"
//     (https://docs.stripe.com/api/payment_intents/search); the fake's lag is Config.SearchLag.
//     List and retrieve are consistent ("these APIs aren't subject to the availability delays",
//     https://docs.stripe.com/search).
//   - Webhooks: event objects {"id":"evt_…","object":"event","api_version","created",
//     "data":{"object":{…}},"livemode","pending_webhooks","request":{"id","idempotency_key"},
//     "type"} (https://docs.stripe.com/api/events/object): payment_intent.created,
//     payment_intent.succeeded, payment_intent.payment_failed,
//     payment_intent.amount_capturable_updated, refund.created (sent for every refund since
//     2024-10-28, https://docs.stripe.com/changelog/acacia/2024-10-28/refund-webhook-update)
//     and charge.refunded, whose data.object is the charge: it carries the payment's metadata,
//     not the refund's. Each is signed "Stripe-Signature: t=<unix>,v1=<hex HMAC-SHA256 of
//     "<t>.<body>">" under the endpoint's secret whsec_…; an event is retried while the endpoint
//     does not answer 2xx, a redirect counting as a failure, and "if Stripe retries an event …
//     we generate a new signature and timestamp for the new delivery attempt"
//     (https://docs.stripe.com/webhooks). Optionally a v0 signature follows, as Stripe's
//     webhook documentation used to show for test-mode events ("Stripe sends an additional
//     signature with a fake v0 scheme, for test mode events", quoted at
//     https://forum.bubble.io/t/stripe-webhook-security/270405).
//   - Faults (Server.Fail), each on one create request: 429 or 503 before the idempotency
//     layer; 409 idempotency_key_in_use; a connection dropped before the commit; a declined
//     card (402 card_error, the PaymentIntent created unpaid, as a failed confirmation leaves
//     it); a 500 after the commit, stored under the key as Stripe stores it; an answer held
//     after the commit (the key in flight meanwhile); a connection dropped after the commit
//     (the lost response). Stripe documents that a 500 is indeterminate and that it may fire
//     webhooks for objects it made (https://docs.stripe.com/error-low-level): the fake's 500
//     always follows a commit, and its webhooks are sent.
//
// # The Go API
//
// New(Config) returns a Server, an http.Handler. Effects(reference) counts the PaymentIntents and
// Refunds whose metadata["reference"] is reference — the ground truth a test asserts "at most
// once" against — and PaymentIntents and Refunds return them. Fail queues faults; PendingFaults
// shows what is left. SetSearchLag changes the lag; SetWebhooks sets the endpoints (URL, secret,
// event types, delay, attempts); Events and Deliveries show what was made and sent. Requests
// records every request with its headers, Authorization included, so a test can check that no
// credential went where it should not. Close stops webhook deliveries. Config.Now is the clock
// of every timestamp, the lag and key retention, so a test crosses 24 hours without sleeping.
//
// # What it does not imitate
//
// Everything outside these endpoints, and inside them: customers and payment methods are not
// checked (any id is accepted as given); 3-D Secure, requires_action, processing and
// asynchronous payment methods; test card numbers and test PaymentMethod ids (a decline comes
// only from the CardDeclined fault, always as generic_decline); capture, cancel and update;
// refunds that are pending or fail; Connect (Stripe-Account), API versions (Stripe-Version is
// accepted and ignored: objects have one shape, events say APIVersion), expand, restricted keys
// and 403; ending_before; search data mismatches (Stripe filters
// some fields from a cache); rate limits by volume (a 429 or 503 comes only from a fault, with
// Retry-After only when the fault sets it: Stripe does not document that header); the
// Stripe-Should-Retry and Request-Id headers; Stripe's retry schedule for webhooks (up to three
// days in live mode, three times over a few hours in a sandbox; the fake retries within
// seconds), their ordering (deliveries run concurrently), duplicate events, secret rolling (one
// v1 signature per active secret), disabled endpoints and source IP addresses; API v2 and its
// 30-day idempotency. Error messages are the fake's own wording, except the 401 message for a
// request without a key; a wrong key is named masked (prefix and last four characters), never in
// full. All state is in memory.
package stripe
