package mocksupplier_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/actledger/actledger/internal/mocksupplier"
)

// BenchmarkCreateOrder measures the fast path (no faults, keys honoured) without the network:
// the handler must not be what limits a throughput benchmark.
func BenchmarkCreateOrder(b *testing.B) {
	sup := mocksupplier.New(mocksupplier.Config{})
	defer sup.Close()
	var workers atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var i int
		prefix := strconv.FormatInt(workers.Add(1), 10)
		for pb.Next() {
			i++
			ref := "po-" + prefix + "-" + strconv.Itoa(i)
			req := httptest.NewRequest(http.MethodPost, "/v1/orders", strings.NewReader(`{"client_reference":"`+ref+`","sku":"bolt","qty":3}`))
			req.Header.Set("Idempotency-Key", ref)
			w := httptest.NewRecorder()
			sup.ServeHTTP(w, req)
			if w.Code != http.StatusCreated {
				b.Fatalf("status %d", w.Code)
			}
		}
	})
}
