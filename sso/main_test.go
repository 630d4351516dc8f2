package sso_test

import (
	"testing"

	"github.com/actledger/actledger/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }
