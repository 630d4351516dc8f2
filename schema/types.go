package schema

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ConfigurePool makes every connection of a pool built from cfg send and
// read the schema's uuid columns as uuid.UUID directly (RegisterTypes),
// keeping any AfterConnect hook cfg already has. Every pool that runs
// actledger's statements is built through it.
func ConfigurePool(cfg *pgxpool.Config) {
	prev := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		RegisterTypes(conn.TypeMap())
		if prev != nil {
			return prev(ctx, conn)
		}
		return nil
	}
}

// RegisterTypes teaches m to encode and scan uuid.UUID as Postgres's
// uuid directly. Without it pgx treats uuid.UUID as a driver.Valuer and
// sql.Scanner: every id parameter is formatted as text, fails a binary
// encode, is parsed back and encoded again, and every scanned id goes
// through a string. Ids are in every statement of the hot path, so that
// detour was a tenth of the process's CPU under load.
func RegisterTypes(m *pgtype.Map) {
	m.RegisterType(&pgtype.Type{Name: "uuid", OID: pgtype.UUIDOID, Codec: uuidCodec{}})
}

// uuidCodec is pgx's UUIDCodec that also knows uuid.UUID.
type uuidCodec struct{ pgtype.UUIDCodec }

func (c uuidCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	switch value.(type) {
	case *uuid.UUID:
		// pgx does not look through a pointer to a driver.Valuer.
		switch format {
		case pgtype.BinaryFormatCode:
			return uuidPointerEncode{uuidBinaryEncode{}}
		case pgtype.TextFormatCode:
			return uuidPointerEncode{uuidTextEncode{}}
		}
	case uuid.UUID:
		switch format {
		case pgtype.BinaryFormatCode:
			return uuidBinaryEncode{}
		case pgtype.TextFormatCode:
			return uuidTextEncode{}
		}
	}
	return c.UUIDCodec.PlanEncode(m, oid, format, value)
}

func (c uuidCodec) PlanScan(m *pgtype.Map, oid uint32, format int16, target any) pgtype.ScanPlan {
	if _, ok := target.(*uuid.UUID); ok {
		switch format {
		case pgtype.BinaryFormatCode:
			return uuidBinaryScan{}
		case pgtype.TextFormatCode:
			return uuidTextScan{}
		}
	}
	return c.UUIDCodec.PlanScan(m, oid, format, target)
}

// uuidPointerEncode encodes a nil *uuid.UUID as NULL and any other as
// the uuid it points to.
type uuidPointerEncode struct{ next pgtype.EncodePlan }

func (p uuidPointerEncode) Encode(value any, buf []byte) ([]byte, error) {
	id := value.(*uuid.UUID)
	if id == nil {
		return nil, nil
	}
	return p.next.Encode(*id, buf)
}

type uuidBinaryEncode struct{}

func (uuidBinaryEncode) Encode(value any, buf []byte) ([]byte, error) {
	id := value.(uuid.UUID)
	return append(buf, id[:]...), nil
}

type uuidTextEncode struct{}

func (uuidTextEncode) Encode(value any, buf []byte) ([]byte, error) {
	return append(buf, value.(uuid.UUID).String()...), nil
}

// The scan plans leave the target as it is on NULL, as uuid.UUID's own
// sql.Scanner does.
type uuidBinaryScan struct{}

func (uuidBinaryScan) Scan(src []byte, target any) error {
	if src == nil {
		return nil
	}
	if len(src) != 16 {
		return fmt.Errorf("invalid length for uuid: %d", len(src))
	}
	*target.(*uuid.UUID) = uuid.UUID(src)
	return nil
}

type uuidTextScan struct{}

func (uuidTextScan) Scan(src []byte, target any) error {
	if src == nil {
		return nil
	}
	id, err := uuid.ParseBytes(src)
	if err != nil {
		return err
	}
	*target.(*uuid.UUID) = id
	return nil
}
