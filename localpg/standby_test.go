package localpg_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/actledger/actledger/internal/testpg"
	"github.com/actledger/actledger/localpg"
)

func connect(t *testing.T, c *localpg.Private) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func insert(t *testing.T, conn *pgx.Conn, from, to int) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), `INSERT INTO acknowledged SELECT generate_series($1::int, $2::int)`, from, to); err != nil {
		t.Fatal(err)
	}
}

// What the harness of the failover tests promises: a primary killed
// after its commits were acknowledged and the standby promoted keeps
// every one of them with a synchronous standby, and loses those made
// after an asynchronous standby stopped receiving.
func TestAPromotedStandbyHoldsWhatItReceived(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		sync     bool
		stopWAL  bool
		wantRows int
	}{
		{"synchronous standby: nothing acknowledged is lost", true, false, 200},
		{"asynchronous standby that stopped receiving: the last commits are lost", false, true, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pair := testpg.New(t, tc.sync)
			primary, standby := pair.Primary, pair.Standby
			conn := connect(t, primary)
			if _, err := conn.Exec(ctx, `CREATE TABLE acknowledged (n int PRIMARY KEY)`); err != nil {
				t.Fatal(err)
			}
			insert(t, conn, 1, 100)
			if tc.stopWAL {
				if err := standby.WaitReplayed(ctx, primary); err != nil {
					t.Fatal(err)
				}
				if err := standby.StopReceiving(ctx); err != nil {
					t.Fatal(err)
				}
			}
			insert(t, conn, 101, 200)
			if err := primary.Kill(); err != nil {
				t.Fatal(err)
			}
			if err := standby.Promote(ctx); err != nil {
				t.Fatal(err)
			}
			var n int
			if err := connect(t, standby).QueryRow(ctx, `SELECT count(*) FROM acknowledged`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != tc.wantRows {
				t.Errorf("the promoted standby holds %d of the 200 acknowledged rows, want %d", n, tc.wantRows)
			}
		})
	}
}
