package durablecli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// metricsServer serves the engine's metrics to Prometheus at /metrics,
// through OpenTelemetry's Prometheus exporter and a registry of its own
// (not the process-wide default one).
type metricsServer struct {
	provider *sdkmetric.MeterProvider
	srv      *http.Server
	addr     net.Addr
	served   chan error
}

// startMetrics listens on addr and serves /metrics there until stop.
func startMetrics(addr string, logger *slog.Logger, prefix string) (*metricsServer, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, fmt.Errorf("metrics exporter: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}))
	m := &metricsServer{
		provider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp)),
		srv:      &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		addr:     ln.Addr(),
		served:   make(chan error, 1),
	}
	go func() { m.served <- m.srv.Serve(ln) }()
	logger.Info(prefix+": serving metrics", "addr", m.addr.String(), "path", "/metrics")
	return m, nil
}

// stop stops serving and shuts the meter provider down.
func (m *metricsServer) stop(ctx context.Context) error {
	err := m.srv.Shutdown(ctx)
	if serr := <-m.served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return errors.Join(err, m.provider.Shutdown(ctx))
}
