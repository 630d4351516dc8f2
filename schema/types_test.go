package schema_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/schema"
)

func TestUUIDsTravelAsBinaryAndBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t) // built with schema.ConfigurePool
	id := uuid.Must(uuid.NewV7())
	ids := []uuid.UUID{uuid.New(), uuid.New()}

	var (
		back     uuid.UUID
		fromNull = uuid.New() // NULL leaves it as it is
		nullPtr  *uuid.UUID
		ptr      *uuid.UUID
		text     string
		arr      []uuid.UUID
	)
	err := pool.QueryRow(ctx, `SELECT $1::uuid, NULL::uuid, $2::uuid, $3::uuid, $1::uuid::text, $4::uuid[]`,
		id, (*uuid.UUID)(nil), &id, ids).Scan(&back, &fromNull, &nullPtr, &ptr, &text, &arr)
	if err != nil {
		t.Fatal(err)
	}
	if back != id || text != id.String() {
		t.Errorf("round trip gave %s (text %s), want %s", back, text, id)
	}
	if fromNull == uuid.Nil {
		t.Errorf("NULL scanned into a uuid.UUID changed it to uuid.Nil; uuid.UUID.Scan leaves it as it was")
	}
	if nullPtr != nil {
		t.Errorf("a nil *uuid.UUID parameter came back as %s, want NULL", nullPtr)
	}
	if ptr == nil || *ptr != id {
		t.Errorf("*uuid.UUID round trip gave %v, want %s", ptr, id)
	}
	if len(arr) != 2 || arr[0] != ids[0] || arr[1] != ids[1] {
		t.Errorf("uuid[] round trip gave %v, want %v", arr, ids)
	}
}

// TestUUIDEncodeSkipsTheTextDetour proves what RegisterTypes is for: an id
// is encoded without formatting it as text first (which allocates a
// string, an error and a parsed copy per parameter).
//
// Not parallel: testing.AllocsPerRun refuses to run in a parallel test.
func TestUUIDEncodeSkipsTheTextDetour(t *testing.T) {
	id := uuid.New()
	encodeAllocs := func(m *pgtype.Map, value any) float64 {
		buf := make([]byte, 0, 64)
		return testing.AllocsPerRun(100, func() {
			out, err := m.Encode(pgtype.UUIDOID, pgtype.BinaryFormatCode, value, buf)
			if err != nil || len(out) != 16 || [16]byte(out) != id {
				t.Fatalf("encode %T gave %x, %v; want the 16 bytes of %s", value, out, err, id)
			}
		})
	}
	plain := pgtype.NewMap()
	registered := pgtype.NewMap()
	schema.RegisterTypes(registered)
	for _, value := range []any{id, &id} {
		if before, after := encodeAllocs(plain, value), encodeAllocs(registered, value); after > 2 || after*4 > before {
			t.Errorf("allocations per %T encode: %.0f registered, %.0f without; want at most 2 and a quarter", value, after, before)
		}
	}
}
