package durable_test

import (
	"context"
	"io"
	"log/slog"
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
