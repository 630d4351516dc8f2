package main

import (
	"testing"

	"github.com/actledger/actledger/internal/testdb"
)

// TestMain reuses the tests' databases (testdb.Main).
func TestMain(m *testing.M) { testdb.Main(m) }

// onlyDatabase is an environment that sets DATABASE_URL to url and
// nothing else.
func onlyDatabase(url string) func(string) string {
	return func(k string) string {
		if k == "DATABASE_URL" {
			return url
		}
		return ""
	}
}
