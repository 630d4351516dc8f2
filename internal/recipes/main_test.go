package recipes_test

import (
	"testing"

	"github.com/actledger/actledger/internal/testdb"
)

// TestMain reuses the tests' databases (testdb.Main).
func TestMain(m *testing.M) { testdb.Main(m) }
