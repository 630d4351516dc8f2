// Package postmark is a fake of Postmark's API for sending one email, written from Postmark's
// public documentation, for tests that run actledger's Postmark recipe
// (docs/providers/postmark.md) against something that fails the way Postmark does. It is a test
// double: no production code path of actledger may import it.
//
// What it imitates, and where each fact comes from:
//
//   - POST /email with {"From", "To", "Cc"?, "Bcc"?, "Subject", "TextBody" and/or "HtmlBody",
//     "Tag"?, "Metadata"?, "MessageStream"?} answers 200 {"To", "SubmittedAt", "MessageID",
//     "ErrorCode": 0, "Message": "OK"} (https://postmarkapp.com/developer/user-guide/send-email-with-api,
//     https://postmarkapp.com/developer/api/email-api). MessageStream defaults to "outbound".
//     Metadata values may be strings, numbers or booleans (kept as their text), not objects.
//   - Credentials: X-Postmark-Server-Token, header name and value compared without regard to
//     case; a missing or wrong token answers 401 (https://postmarkapp.com/developer/api/overview)
//     with {"ErrorCode": 10, "Message": "Request does not contain a valid Server token."}, the
//     answer reported in https://github.com/PipedreamHQ/pipedream/issues/10254. An account token
//     (X-Postmark-Account-Token) is not a server token; sending both is refused with ErrorCode 10
//     as reported in https://github.com/keighl/postmark/issues/1.
//   - Errors: 422 with {"ErrorCode", "Message"}, the code from Postmark's table
//     (https://postmarkapp.com/developer/api/overview#error-codes): 402 invalid JSON, 403
//     incompatible JSON, 300 invalid email request (a bad address, no TextBody or HtmlBody, more
//     than 50 recipients: https://postmarkapp.com/support/article/1180-what-does-errorcode-300-mean),
//     406 inactive recipient (Config.InactiveRecipients). Faults add 429 (rate limit), 500 and
//     401. Postmark says of a 500 that "in most cases the message is lost" (the overview above;
//     the sentence is quoted in full at https://docs.tallymarks.io/api-documentation/error-handling);
//     the fake has a 500 before commit and one after it, because most is not all. The official Node.js client maps
//     401, 404, 422, 429, 500 and 503 to its errors
//     (https://github.com/ActiveCampaign/postmark.js, src/client/errors/ErrorHandler.ts).
//   - No idempotency key: "Postmark does not currently support an idempotency key feature"
//     (https://postmarkapp.com/support/article/what-is-an-idempotency-key), so two identical
//     requests send two emails. Whoever must find a message after a lost answer has to carry a
//     reference in it; actledger's recipe puts the external key in Metadata, which the recipient
//     does not see (https://postmarkapp.com/support/article/1125-custom-metadata-faq).
//     Server.Effects counts messages by a Metadata value.
//   - GET /messages/outbound?count=…&offset=…, the outbound message search
//     (https://postmarkapp.com/developer/api/messages-api): count (at most 500) and offset are
//     required and count + offset may not exceed 10,000; filters recipient, fromemail, tag,
//     status, subject, messagestream, fromdate, todate (Eastern time) and one metadata_<key>=<value>
//     ("you can currently only search by a single metadata field at a time", custom metadata FAQ
//     above). It answers {"TotalCount", "Messages": [{"MessageID", "To", "Metadata", "Status", …}]},
//     newest first. The reference says the search needs the server token and Accept:
//     application/json; the fake checks the token and records the Accept header. Config.LookupLag
//     hides messages younger than it; Postmark documents no lag for the search, and no guarantee
//     that there is none.
//
// For tests it adds what Postmark cannot give: Server.Effects, the ground truth of how many
// messages carry a reference whatever any client was told; a fault queue (SetFaults) consumed one
// per send request, with faults after commit (the connection dropped with no answer, a 500, a late
// answer) and before it (429, 422, 500, 401); and Server.Requests, every request with its
// headers, so a test can prove a credential went only where it should.
//
// What it does not imitate: webhooks (Postmark's delivery, bounce and open webhooks carry no
// signature; they are protected by basic authentication in the URL or by Postmark's IP
// addresses, https://postmarkapp.com/developer/webhooks/webhooks-overview, which none of
// actledger's signature schemes fits, so the recipe settles by lookup alone), delivery itself
// (bounces, opens, the "queued" status: every message is "Sent" at once), sender signatures and
// domains (any From address is accepted), the POSTMARK_API_TEST token, batch and template
// sending, attachments, message details and dumps, the retention period after which messages
// leave the search (45 days by default), real rate limits, and maintenance (ErrorCode 100).
// Message texts the documentation does not quote are the fake's own.
//
// Everything lives in memory behind one mutex, but for the record of requests, which keeps its
// own.
package postmark
