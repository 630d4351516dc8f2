package webhook_test

import (
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
