package durable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/bloat"
	"github.com/effectivelabs/durable/store"
)

// ErrStorageUnsupported is returned by Engine.Storage on a store that
// keeps no tables (it does not implement store.StorageReader): memstore.
var ErrStorageUnsupported = errors.New("durable: store has no tables to report the storage of")

// Storage reads the storage of the store's tables (their rows, dead rows
// and sizes, when vacuum last reached them, and whether autovacuum is on)
// and judges it: the tables with more dead rows than vacuum should have
// left have their Attention set, and the server settings that keep vacuum
// from reclaiming them are in Warnings (see docs/operating.md, "Bloat").
// It costs one catalog query, whatever the tables hold. It fails with
// ErrStorageUnsupported on a store without tables.
func (e *Engine) Storage(ctx context.Context) (*durabletype.Storage, error) {
	r, ok := e.store.(store.StorageReader)
	if !ok {
		return nil, ErrStorageUnsupported
	}
	st, err := r.Storage(ctx)
	if err != nil {
		return nil, fmt.Errorf("durable: storage: %w", err)
	}
	bloat.Judge(st)
	return st, nil
}

// StorageMetricsTTL is how long the storage gauges reuse a reading: a
// scrape within it of the previous reading queries nothing.
const StorageMetricsTTL = 10 * time.Second

// storageTimeout bounds the reading a scrape makes.
const storageTimeout = 5 * time.Second

// storageMeters report the storage of the store's tables as gauges, read
// when the metrics are collected (a scrape), at most once per
// StorageMetricsTTL, and only by the engine that leads, so that a fleet
// of workers queries the catalog once per scrape, not once per worker.
type storageMeters struct {
	e                           *Engine
	live, dead, size, attention metric.Int64ObservableGauge

	mu    sync.Mutex
	read  time.Time // when st was read, on this process's clock
	st    *durabletype.Storage
	attrs map[string]*attrs
}

// newStorageMeters registers the storage gauges of e on mt, if e's store
// has tables; nil otherwise.
func newStorageMeters(mt metric.Meter, e *Engine) (*storageMeters, error) {
	if _, ok := e.store.(store.StorageReader); !ok {
		return nil, nil
	}
	m := &storageMeters{e: e, attrs: map[string]*attrs{}}
	var err error
	gauge := func(name, unit, desc string) metric.Int64ObservableGauge {
		opts := []metric.Int64ObservableGaugeOption{metric.WithDescription(desc)}
		if unit != "" { // none for a flag: the exporter would name "1" a ratio
			opts = append(opts, metric.WithUnit(unit))
		}
		g, e := mt.Int64ObservableGauge(name, opts...)
		if err == nil {
			err = e
		}
		return g
	}
	m.live = gauge(MetricTableLiveRows, "{row}", "Live rows of each table of the store, as PostgreSQL estimates them; reported by the leader.")
	m.dead = gauge(MetricTableDeadRows, "{row}", "Dead rows (row versions vacuum has not reclaimed) of each table of the store; reported by the leader.")
	m.size = gauge(MetricTableSize, "By", "Size of each table of the store on disk: heap, TOAST and indexes; reported by the leader.")
	m.attention = gauge(MetricTableAttention, "", "1 for each table of the store whose dead rows need attention (docs/operating.md, Bloat), 0 for the others; reported by the leader.")
	if err != nil {
		return nil, err
	}
	if _, err := mt.RegisterCallback(m.observe, m.live, m.dead, m.size, m.attention); err != nil {
		return nil, err
	}
	return m, nil
}

// observe reports the storage of the tables, if this engine leads.
func (m *storageMeters) observe(ctx context.Context, o metric.Observer) error {
	if !m.e.leads() {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.read.IsZero() || time.Since(m.read) >= StorageMetricsTTL {
		// A failed reading is not tried again within the TTL either: a
		// database in trouble gets no query per scrape.
		ctx, cancel := context.WithTimeout(ctx, storageTimeout)
		st, err := m.e.Storage(ctx)
		cancel()
		m.st, m.read = st, time.Now()
		if err != nil {
			m.e.log.Warn("durable: reading the storage of the tables for the metrics", slog.Any("error", err))
			return nil
		}
	}
	if m.st == nil {
		return nil
	}
	for _, t := range m.st.Tables {
		a := m.attrs[t.Name]
		if a == nil {
			a = newAttrs(attribute.String(AttrTable, t.Name))
			m.attrs[t.Name] = a
		}
		o.ObserveInt64(m.live, t.LiveRows, a.obs...)
		o.ObserveInt64(m.dead, t.DeadRows, a.obs...)
		o.ObserveInt64(m.size, t.TotalBytes, a.obs...)
		flag := int64(0)
		if t.Attention != "" {
			flag = 1
		}
		o.ObserveInt64(m.attention, flag, a.obs...)
	}
	return nil
}

// leads reports whether this engine is started and leads now.
func (e *Engine) leads() bool {
	e.mu.Lock()
	rt, stopped := e.rt, e.stopped
	e.mu.Unlock()
	return rt != nil && !stopped && rt.leading()
}
