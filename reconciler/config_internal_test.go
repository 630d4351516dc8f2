package reconciler

import (
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/provider"
)

func TestConfigDefaultsAndValidation(t *testing.T) {
	t.Parallel()
	if got := (Config{}).withDefaults(); got.UnappliedAfter != DefaultUnappliedAfter || got.SweepInterval != DefaultSweepInterval {
		t.Errorf("Config{}.withDefaults() = %+v", got)
	}
	reg := &provider.Registry{}
	tests := []struct {
		cfg  Config
		want string
	}{
		{Config{}, "Config.Registry"},
		{Config{Registry: reg, UnappliedAfter: -time.Second}, "Config.UnappliedAfter"},
		{Config{Registry: reg, SweepInterval: -time.Second}, "Config.SweepInterval"},
		{Config{Registry: reg}, ""},
	}
	for _, tt := range tests {
		err := tt.cfg.withDefaults().validate()
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("validate(%+v) = %v, want %q", tt.cfg, err, tt.want)
		}
	}
}
