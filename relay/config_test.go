package relay_test

import (
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/internal/testnats"
	"github.com/actledger/actledger/relay"
)

func TestConfigZeroValuesTakeTheDefaults(t *testing.T) {
	t.Parallel()
	got := relay.Config{}.WithDefaults()
	if got.BatchSize != relay.DefaultBatchSize || got.PollInterval != relay.DefaultPollInterval ||
		got.PublishTimeout != relay.DefaultPublishTimeout || got.Logger == nil {
		t.Errorf("Config{}.WithDefaults() = %+v, want every Default… constant and a logger", got)
	}
	if _, err := relay.New(testdb.New(t), testnats.New(t).JetStream(), relay.Config{}); err != nil {
		t.Errorf("the defaults do not validate: %v", err)
	}
}

func TestNewRefusesANegativeConfigValue(t *testing.T) {
	t.Parallel()
	pool, js := testdb.New(t), testnats.New(t).JetStream()
	for name, cfg := range map[string]relay.Config{
		"BatchSize":      {BatchSize: -1},
		"PollInterval":   {PollInterval: -time.Second},
		"PublishTimeout": {PublishTimeout: -time.Second},
	} {
		_, err := relay.New(pool, js, cfg)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("New(%s negative) = %v, want an error naming %s", name, err, name)
		}
	}
}
