package durable_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/memstore"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// launch starts an engine on s with the given workflows; the test stops it.
func launch(t *testing.T, s *memstore.Store, cfg durable.Config, wfs ...durable.Definition) *durable.Engine {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	e, err := durable.New(s, cfg)
	require.NoError(t, err)
	require.NoError(t, e.Register(wfs...))
	require.NoError(t, e.Start(context.Background()))
	return e
}

// startEngine starts an engine on s with the given workflows; it is stopped
// when the test (or synctest bubble) ends.
func startEngine(t *testing.T, s *memstore.Store, cfg durable.Config, wfs ...durable.Definition) *durable.Engine {
	t.Helper()
	e := launch(t, s, cfg, wfs...)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, e.Stop(ctx))
	})
	return e
}

// memStarter starts engines on the in-memory store s.
func memStarter(s *memstore.Store) starter {
	return func(t *testing.T, wfs ...durable.Definition) *durable.Engine {
		return startEngine(t, s, durable.Config{}, wfs...)
	}
}

// counter counts calls by key, safely across goroutines.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) inc(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[key]++
	return c.n[key]
}

func (c *counter) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

func (c *counter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.n))
	for k, v := range c.n {
		out[k] = v
	}
	return out
}
