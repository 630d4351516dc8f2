package auth_test

import (
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/auth"
)

func TestConfigDefaultsAndValidation(t *testing.T) {
	t.Parallel()
	if got := (auth.Config{}).WithDefaults(); got.CacheTTL != auth.DefaultCacheTTL || got.CacheSize != auth.DefaultCacheSize {
		t.Errorf("Config{}.WithDefaults() = %+v", got)
	}
	tests := []struct {
		cfg  auth.Config
		want string // in the error; "" for none
	}{
		{auth.Config{}, ""},
		{auth.Config{CacheTTL: auth.NoCache}, ""},
		{auth.Config{CacheTTL: -time.Hour}, ""},
		{auth.Config{CacheTTL: auth.MaxCacheTTL}, ""},
		{auth.Config{CacheTTL: auth.MaxCacheTTL + time.Second}, "Config.CacheTTL"},
		{auth.Config{CacheSize: -1}, "Config.CacheSize"},
	}
	for _, tt := range tests {
		_, err := auth.New(nil, nil, tt.cfg)
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("New(%+v) = %v, want %q", tt.cfg, err, tt.want)
		}
	}
}
