package dispatcher

import (
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/provider"
)

// The zero config gets each exported default, applied in one place.
func TestConfigZeroValuesAreTheExportedDefaults(t *testing.T) {
	t.Parallel()
	got := Config{}.withDefaults()
	if got.Concurrency != DefaultConcurrency || got.LeaseDuration != DefaultLeaseDuration ||
		got.CallMargin != min(DefaultMaxCallMargin, DefaultLeaseDuration/10) || got.WorkerID == "" {
		t.Errorf("Config{}.withDefaults() = %+v", got)
	}
	s := SweeperConfig{}.withDefaults()
	if s.Interval != DefaultSweepInterval || s.StuckAfter != DefaultStuckAfter || s.MaxRedispatchBackoff != DefaultMaxRedispatchBackoff ||
		s.Batch != DefaultSweepBatch || s.WorkerID != DefaultSweeperWorkerID {
		t.Errorf("SweeperConfig{}.withDefaults() = %+v", s)
	}
}

func TestValidateNamesTheBadField(t *testing.T) {
	t.Parallel()
	reg := &provider.Registry{}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"dispatcher without registry", Config{}.withDefaults().validate(), "Config.Registry"},
		{"negative concurrency", Config{Registry: reg, Concurrency: -1}.withDefaults().validate(), "Config.Concurrency"},
		{"negative lease", Config{Registry: reg, LeaseDuration: -time.Second}.withDefaults().validate(), "Config.LeaseDuration"},
		{"negative margin", Config{Registry: reg, CallMargin: -time.Second}.withDefaults().validate(), "Config.CallMargin"},
		{"dispatcher ok", Config{Registry: reg}.withDefaults().validate(), ""},
		{"sweeper without registry", SweeperConfig{}.withDefaults().validate(), "SweeperConfig.Registry"},
		{"negative interval", SweeperConfig{Registry: reg, Interval: -time.Second}.withDefaults().validate(), "SweeperConfig.Interval"},
		{"negative stuck after", SweeperConfig{Registry: reg, StuckAfter: -time.Second}.withDefaults().validate(), "SweeperConfig.StuckAfter"},
		{"negative backoff", SweeperConfig{Registry: reg, MaxRedispatchBackoff: -time.Second}.withDefaults().validate(), "SweeperConfig.MaxRedispatchBackoff"},
		{"negative batch", SweeperConfig{Registry: reg, Batch: -1}.withDefaults().validate(), "SweeperConfig.Batch"},
		{"sweeper ok", SweeperConfig{Registry: reg}.withDefaults().validate(), ""},
	}
	for _, tt := range tests {
		switch {
		case tt.want == "" && tt.err != nil:
			t.Errorf("%s: %v, want none", tt.name, tt.err)
		case tt.want != "" && (tt.err == nil || !strings.Contains(tt.err.Error(), tt.want)):
			t.Errorf("%s: %v, want an error naming %s", tt.name, tt.err, tt.want)
		}
	}
}
