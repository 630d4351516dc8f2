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

// TestCredentialsAreSeenInEveryForm: the warning about a remote server
// reached without credentials is not given for any way of presenting them.
func TestCredentialsAreSeenInEveryForm(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		cfg  Config
		want bool
	}{
		{"none", Config{URL: "nats://127.0.0.1:4222"}, false},
		{"none, several URLs", Config{URL: "nats://a:4222, nats://b:4222"}, false},
		{"credentials file", Config{URL: "nats://127.0.0.1:4222", CredsFile: "/x.creds"}, true},
		{"user and password", Config{URL: "nats://127.0.0.1:4222", User: "u", Password: "p"}, true},
		{"nkey", Config{URL: "nats://127.0.0.1:4222", NkeyFile: "/x.nk"}, true},
		{"user in a URL", Config{URL: "nats://a:4222,nats://u:p@b:4222"}, true},
		{"token in the URL", Config{URL: "tls://s3cret@127.0.0.1:4222"}, true},
	} {
		if got := tt.cfg.hasCredentials(); got != tt.want {
			t.Errorf("%s: hasCredentials = %v, want %v", tt.name, got, tt.want)
		}
	}
}
