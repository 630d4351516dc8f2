package retention_test

import (
	"testing"
	"time"

	"github.com/actledger/actledger/retention"
)

// TestParseDurationTakesDaysOrAGoDuration: "90d" is 90 days; a Go
// duration reads as Go reads it; anything else, or nothing positive, is
// refused rather than guessed at.
func TestParseDurationTakesDaysOrAGoDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"90d", 90 * 24 * time.Hour, true},
		{" 1d ", 24 * time.Hour, true},
		{"36h", 36 * time.Hour, true},
		{"90m", 90 * time.Minute, true},
		{"0d", 0, false},
		{"-1d", 0, false},
		{"1.5d", 0, false},
		{"90", 0, false},
		{"d", 0, false},
		{"0s", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		got, err := retention.ParseDuration(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseDuration(%q) = %s, %v; want %s, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}
