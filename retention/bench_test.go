package retention_test

import (
	"context"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/testbigledger"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/retention"
)

// BenchmarkPruneLargeLedger prunes the ledger of bigledger (200,000
// operations over 69 days, 97 % terminal, 840,000 events) with a
// retention of 30 days, archiving to a directory: about 110,000
// operations and their histories go. It reports operations archived and
// deleted per second. Run it once per fill:
//
//	go test -run '^$' -bench BenchmarkPruneLargeLedger -benchtime 1x ./retention/
func BenchmarkPruneLargeLedger(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		l := testbigledger.New(b)
		p, err := retention.New(retention.Config{Store: ledger.New(l.Pool, ledger.Config{}), Pool: l.Pool,
			OlderThan: 30 * 24 * time.Hour, Archive: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		s, err := p.Run(context.Background(), false)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(s.Operations)/s.Duration.Seconds(), "ops/s")
		b.ReportMetric(float64(s.Events)/s.Duration.Seconds(), "events/s")
		b.Logf("%+v", s)
	}
}
