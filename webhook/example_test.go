package webhook_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/actledger/actledger/webhook"
)

// A supplier signs the raw body; actledger verifies it before decoding anything, accepting the
// old and the new secret while a rotation is under way.
func Example() {
	body := []byte(`{"event_id":"evt_1","type":"order.created","reference":"op_1","provider_reference":"ord_1","status":"succeeded"}`)
	sentAt := time.Unix(1_750_000_000, 0)
	header := webhook.Sign([]byte("whsec_old"), sentAt, body)

	secrets := [][]byte{[]byte("whsec_new"), []byte("whsec_old")}
	fmt.Println(webhook.Verify(header, body, secrets, sentAt.Add(time.Minute), webhook.DefaultTolerance))
	fmt.Println(webhook.Verify(header, body, secrets, sentAt.Add(time.Hour), webhook.DefaultTolerance) != nil)
	// Output:
	// <nil>
	// true
}

// A Standard Webhooks supplier sends three headers; actledger verifies them under the scheme the
// provider is configured with, and can say which header a refused request lacked.
func ExampleVerifyRequest() {
	scheme, err := webhook.ParseScheme("standard")
	if err != nil {
		fmt.Println(err)
		return
	}
	secret := []byte("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	body := []byte(`{"id":"evt_1","type":"ticket.created"}`)
	sentAt := time.Unix(1_750_000_000, 0)
	h, err := webhook.SignHeaders(scheme, secret, "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", sentAt, body)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(webhook.VerifyRequest(scheme, h, body, [][]byte{secret}, sentAt.Add(time.Minute), webhook.DefaultTolerance))

	h.Del("webhook-timestamp")
	err = webhook.VerifyRequest(scheme, h, body, [][]byte{secret}, sentAt, webhook.DefaultTolerance)
	var missing *webhook.MissingHeaderError
	if errors.As(err, &missing) {
		fmt.Println("missing_header", missing.Header, errors.Is(err, webhook.ErrMalformed))
	}
	fmt.Println(scheme.Headers())
	// Output:
	// <nil>
	// missing_header webhook-timestamp true
	// [webhook-id webhook-timestamp webhook-signature]
}
