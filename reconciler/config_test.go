package reconciler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/provider"
	"github.com/actledger/actledger/reconciler"
)

func TestConfigDefaultsAndValidation(t *testing.T) {
	t.Parallel()
	if got := (reconciler.Config{}).WithDefaults(); got.UnappliedAfter != reconciler.DefaultUnappliedAfter || got.SweepInterval != reconciler.DefaultSweepInterval {
		t.Errorf("Config{}.WithDefaults() = %+v", got)
	}
	reg := &provider.Registry{}
	tests := []struct {
		cfg  reconciler.Config
		want string
	}{
		{reconciler.Config{}, "Config.Registry"},
		{reconciler.Config{Registry: reg, UnappliedAfter: -time.Second}, "Config.UnappliedAfter"},
		{reconciler.Config{Registry: reg, SweepInterval: -time.Second}, "Config.SweepInterval"},
		{reconciler.Config{Registry: reg}, ""},
	}
	for _, tt := range tests {
		_, err := reconciler.New(nil, nil, tt.cfg)
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("New(%+v) = %v, want %q", tt.cfg, err, tt.want)
		}
	}
}
