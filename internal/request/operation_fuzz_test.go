package request

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// FuzzDecodeOperationRequest feeds arbitrary bodies to the operation
// request decoder: it must never panic, and every refusal must be an
// *Error with a message and one of Codes, which the api answers as a 400
// (never a 500: api.TestBadInputIsRefusedAndWritesNothing).
func FuzzDecodeOperationRequest(f *testing.F) {
	for _, seed := range []string{
		`{"action":"supplier.create_order","key":"po-1","params":{"sku":"A-1"},"approval_id":"0193a7a0-0000-7000-8000-000000000000"}`,
		`{"action":`,
		`[1,2]`,
		``,
		`null`,
		`{"action":"a","params":{},"approval_id":"x","priority":1}`,
		`{"action":7}`,
		`{"action":"a","key":"","params":{},"approval_id":"0193a7a0-0000-7000-8000-000000000000"}`,
		`{"action":"a","params":[1],"approval_id":"0193a7a0-0000-7000-8000-000000000000"}`,
		`{"action":"a","params":{}}{"x":1}`,
		"{\"action\":\"\xff\xfe\"}",
		`{"action":"a","params":{"n":1e999},"approval_id":"0193a7a0-0000-7000-8000-000000000000"}`,
		`{"action":"a","params":{"k":"` + strings.Repeat("x", 4096) + `"}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req Operation
		err := Decode(body, &req)
		for _, businessKey := range []bool{false, true} {
			if err == nil {
				_, err = req.Validate(businessKey)
			}
		}
		if err == nil {
			return
		}
		var refusal *Error
		if !errors.As(err, &refusal) {
			t.Fatalf("error %v is not a request refusal", err)
		}
		if !slices.Contains(Codes, refusal.Code) || refusal.Message == "" {
			t.Fatalf("refusal %+v has no message or a code not in Codes", refusal)
		}
	})
}
