package durable_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
	"github.com/effectivelabs/durable/memstore"
	"github.com/effectivelabs/durable/pgstore"
)

// TestStorageUnsupported: a store without tables has no storage to
// report: Engine.Storage says so with its error, and the engine's metrics
// have no table gauges.
func TestStorageUnsupported(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	e, err := durable.New(memstore.New(), durable.Config{Logger: quiet,
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	require.NoError(t, err)
	_, err = e.Storage(context.Background())
	require.ErrorIs(t, err, durable.ErrStorageUnsupported)
	require.NoError(t, e.Start(context.Background()))
	defer stopNow(t, e)
	ms := collect(t, reader)
	for _, name := range []string{durable.MetricTableLiveRows, durable.MetricTableDeadRows, durable.MetricTableSize, durable.MetricTableAttention} {
		require.NotContains(t, ms, name)
	}
}

// TestPGStorage: Engine.Storage reads pgstore's tables and judges them: a
// table with many dead rows and autovacuum off needs attention, the
// others do not.
func TestPGStorage(t *testing.T) {
	t.Parallel()
	env := pgSetup(t)
	e := pgClient(t, env.store)
	st, err := e.Storage(context.Background())
	require.NoError(t, err)
	require.NotEmpty(t, st.Tables)
	for _, tb := range st.Tables {
		require.Empty(t, tb.Attention, "a new schema needs no attention: %s", tb.Name)
	}

	pgtest.DeadTasks(t, env.pool, env.schema, 12_000)
	pgEventually(t, 15*time.Second, func() bool {
		st, err = e.Storage(context.Background())
		require.NoError(t, err)
		return tableNamed(st, "tasks").DeadRows >= 12_000
	}, "the dead tasks show in the statistics")
	for _, tb := range st.Tables {
		if tb.Name == "tasks" {
			require.Contains(t, tb.Attention, "autovacuum is off")
		} else if tb.DeadRows < 10_000 {
			require.Empty(t, tb.Attention, tb.Name)
		}
	}
}

func tableNamed(st *durabletype.Storage, name string) durabletype.TableStorage {
	for _, tb := range st.Tables {
		if tb.Name == name {
			return tb
		}
	}
	return durabletype.TableStorage{}
}

// countingStore counts the storage reads of a pgstore.Store.
type countingStore struct {
	*pgstore.Store
	reads atomic.Int64
}

func (s *countingStore) Storage(ctx context.Context) (*durabletype.Storage, error) {
	s.reads.Add(1)
	return s.Store.Storage(ctx)
}

// TestPGMetricsTableStorage: the leader reports the storage of the tables
// as gauges, read when the metrics are collected and reused within
// StorageMetricsTTL; an engine that does not lead reports none.
func TestPGMetricsTableStorage(t *testing.T) {
	t.Parallel()
	env := pgSetup(t)
	pgtest.DeadTasks(t, env.pool, env.schema, 12_000)

	type engine struct {
		reader *sdkmetric.ManualReader
		store  *countingStore
		e      *durable.Engine
	}
	var engines [2]engine
	for i := range engines {
		reader := sdkmetric.NewManualReader()
		// The default lease: leadership does not move during the test.
		ps, err := pgstore.New(env.pool, &pgstore.Config{Schema: env.schema})
		require.NoError(t, err)
		s := &countingStore{Store: ps}
		e, err := durable.New(s, pgFast(durable.Config{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))}))
		require.NoError(t, err)
		require.NoError(t, e.Start(context.Background()))
		t.Cleanup(func() { stopNow(t, e) })
		engines[i] = engine{reader, s, e}
	}
	gauge := func(ms map[string]metricdata.Metrics, name string) map[string]int64 {
		m, ok := ms[name]
		if !ok {
			return nil
		}
		out := map[string]int64{}
		for _, dp := range m.Data.(metricdata.Gauge[int64]).DataPoints {
			out[attrKey(dp.Attributes)] = dp.Value
		}
		return out
	}
	var leader, other engine
	var ms map[string]metricdata.Metrics
	var read time.Time // at or before the leader's last reading
	pgEventually(t, 30*time.Second, func() bool {
		for i, en := range engines {
			read = time.Now()
			ms = collect(t, en.reader)
			if gauge(ms, durable.MetricTableDeadRows)["tasks"] >= 12_000 {
				leader, other = en, engines[1-i]
				return true
			}
		}
		return false
	}, "the leader reports the dead tasks")
	require.Equal(t, int64(1), gauge(ms, durable.MetricTableAttention)["tasks"])
	require.Equal(t, int64(0), gauge(ms, durable.MetricTableAttention)["workers"])
	require.Positive(t, gauge(ms, durable.MetricTableSize)["tasks"])
	require.Contains(t, gauge(ms, durable.MetricTableLiveRows), "runs")

	require.Empty(t, gauge(collect(t, other.reader), durable.MetricTableDeadRows), "an engine that does not lead reports no storage")
	require.Zero(t, other.store.reads.Load(), "an engine that does not lead reads no storage")

	reads := leader.store.reads.Load()
	require.NotEmpty(t, gauge(collect(t, leader.reader), durable.MetricTableDeadRows))
	if time.Since(read) < durable.StorageMetricsTTL {
		require.Equal(t, reads, leader.store.reads.Load(), "a collection within the TTL reuses the last reading")
	}
}

// failingStorage is a store with tables whose storage cannot be read.
type failingStorage struct {
	*memstore.Store
	reads atomic.Int64
}

func (s *failingStorage) Storage(context.Context) (*durabletype.Storage, error) {
	s.reads.Add(1)
	return nil, errors.New("catalog unreachable")
}

// TestMetricsTableStorageFailing: a reading that fails reports no table
// gauges, fails no collection, and is not tried again within
// StorageMetricsTTL: a database in trouble gets no query per scrape.
func TestMetricsTableStorageFailing(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	s := &failingStorage{Store: memstore.New()}
	e, err := durable.New(s, durable.Config{Logger: quiet, MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	require.NoError(t, err)
	_, err = e.Storage(context.Background())
	require.ErrorContains(t, err, "catalog unreachable")
	s.reads.Store(0)
	require.NoError(t, e.Start(context.Background()))
	defer stopNow(t, e)
	var first time.Time
	pgEventually(t, 10*time.Second, func() bool { // memstore's engine leads once its leader starts
		first = time.Now()
		collect(t, reader)
		return s.reads.Load() > 0
	}, "the leader reads the storage when collected")
	require.NotContains(t, collect(t, reader), durable.MetricTableDeadRows)
	if time.Since(first) < durable.StorageMetricsTTL {
		require.Equal(t, int64(1), s.reads.Load(), "a failed reading is not tried again within the TTL")
	}
}
