package relay

import (
	"strings"
	"testing"
	"time"
)

func TestConfigZeroValuesTakeTheDefaults(t *testing.T) {
	t.Parallel()
	got := Config{}.withDefaults()
	if got.BatchSize != DefaultBatchSize || got.PollInterval != DefaultPollInterval ||
		got.PublishTimeout != DefaultPublishTimeout || got.Logger == nil {
		t.Errorf("Config{}.withDefaults() = %+v, want every Default… constant and a logger", got)
	}
	if err := got.validate(); err != nil {
		t.Errorf("the defaults do not validate: %v", err)
	}
}

func TestNewRefusesANegativeConfigValue(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]Config{
		"BatchSize":      {BatchSize: -1},
		"PollInterval":   {PollInterval: -time.Second},
		"PublishTimeout": {PublishTimeout: -time.Second},
	} {
		err := cfg.withDefaults().validate()
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("validate(%s negative) = %v, want an error naming %s", name, err, name)
		}
	}
}
