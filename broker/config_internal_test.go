package broker

import (
	"strings"
	"testing"
	"time"
)

func TestConfigDefaultsAndValidation(t *testing.T) {
	t.Parallel()
	got := Config{}.withDefaults()
	if got.DataDir != DefaultDataDir || got.Prefix != DefaultPrefix || got.Replicas != DefaultReplicas ||
		got.Duplicates != DefaultDuplicates || got.MaxAge != DefaultMaxAge || got.Name != DefaultName {
		t.Errorf("Config{}.withDefaults() = %+v", got)
	}
	tests := []struct {
		cfg  Config
		want string
	}{
		{Config{Prefix: "A.B"}, "Config.Prefix"},
		{Config{Prefix: "A B"}, "Config.Prefix"},
		{Config{Replicas: -1}, "Config.Replicas"},
		{Config{Duplicates: -time.Second}, "Config.Duplicates"},
		{Config{MaxAge: -time.Second}, "Config.MaxAge"},
		{Config{}, ""},
	}
	for _, tt := range tests {
		err := tt.cfg.withDefaults().validate()
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("validate(%+v) = %v, want %q", tt.cfg, err, tt.want)
		}
	}
}
