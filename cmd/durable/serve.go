package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/httpapi"
	"github.com/effectivelabs/durable/internal/workloads"
)

const serveUsage = `Usage: durable serve --database-url URL [--addr 127.0.0.1:8080] [--token T] [flags]

Serves the HTTP API (see README.md, "HTTP API"; the OpenAPI document is at
/api/v1/openapi.json) on --addr until SIGTERM or SIGINT, then stops
accepting connections and lets requests in flight finish for up to
--shutdown-timeout. It lists, shows, cancels and replays runs, sends events
and signals, and triggers the built-in workflows (those "durable worker"
serves) by name; it executes no step: "durable worker" processes do.
/healthz answers while the process is up, /readyz while PostgreSQL answers
and the schema is current (this command does not migrate it). The web
dashboard is at / (runs, their DAGs, attempts and events, cancel and
replay, the live workers, queue depths); it asks for the token.

Every request but /healthz and /readyz must carry "Authorization: Bearer
<token>", the token given by --token or, better (a flag is visible to other
users in the process list), by $DURABLE_API_TOKEN. Without a token the API
is served only on a loopback address, unless --no-auth says that something
in front of it authenticates. --tenant scopes the whole API to one tenant:
other tenants' runs are not found, and runs are triggered for that tenant.
The workers (/api/v1/workers) are shown whatever the tenant.

Exit status: 0 stopped, 1 failed (could not connect or listen), 2 bad flags.

Flags:
`

// envAPIToken supplies the default of --token.
const envAPIToken = "DURABLE_API_TOKEN"

// serveOptions are the flags of "durable serve".
type serveOptions struct {
	db              dbFlags
	addr            string
	token           string
	noAuth          bool
	tenant          string
	maxBody         int64
	dashboard       bool
	shutdownTimeout time.Duration
	logFormat       string
	logLevel        string
}

func serveCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o serveOptions
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	o.db.register(fs, true)
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8080", "address to listen on, host:port (port 0: any free port)")
	fs.StringVar(&o.token, "token", os.Getenv(envAPIToken), "bearer token every API request must carry (default $"+envAPIToken+")")
	fs.BoolVar(&o.noAuth, "no-auth", false, "serve without a token on any address (authentication is done in front)")
	fs.StringVar(&o.tenant, "tenant", "", "scope the API to this tenant (default: every tenant)")
	fs.BoolVar(&o.dashboard, "dashboard", true, "serve the web dashboard at / (--dashboard=false: the API only)")
	fs.Int64Var(&o.maxBody, "max-body", httpapi.DefaultMaxBodyBytes, "largest request body in bytes")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long requests in flight may finish after SIGTERM")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), serveUsage)
		fs.PrintDefaults()
	}
	if code := parseFlags(fs, args, stderr, 0); code >= 0 {
		return code
	}
	logger, err := newLogger(stderr, o.logFormat, o.logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "durable serve: %v\n", err)
		return exitUsage
	}
	if o.db.url == "" {
		fmt.Fprintf(stderr, "durable serve: --database-url (or $%s) is required\n", envDatabaseURL)
		return exitUsage
	}
	if o.maxBody < 1 {
		fmt.Fprintf(stderr, "durable serve: --max-body must be positive, got %d\n", o.maxBody)
		return exitUsage
	}
	if o.token == "" && !o.noAuth && !loopback(o.addr) {
		fmt.Fprintf(stderr, "durable serve: --addr %s is not a loopback address: set --token (or $%s), or --no-auth if something in front authenticates\n",
			o.addr, envAPIToken)
		return exitUsage
	}
	if err := runServe(ctx, &o, logger); err != nil {
		logger.Error("durable serve: " + err.Error())
		return 1
	}
	return 0
}

// loopback reports whether addr listens on a loopback address only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func runServe(ctx context.Context, o *serveOptions, logger *slog.Logger) error {
	s, pool, err := o.db.openStore(ctx, 8, false)
	if err != nil {
		return err
	}
	defer pool.Close()
	// A client engine, never started: it triggers and operates runs, and
	// knows the built-in workflows to trigger them by name and draw them.
	e, err := durable.New(s, durable.Config{Logger: logger})
	if err != nil {
		return err
	}
	if err := e.Register(workloads.New(workloads.Options{}).All()...); err != nil {
		return err
	}
	opts := httpapi.Options{Logger: logger, MaxBodyBytes: o.maxBody, Dashboard: o.dashboard}
	if o.token != "" {
		opts.Authenticate = httpapi.BearerToken(o.token)
	}
	if o.tenant != "" {
		tenant := o.tenant
		opts.Tenant = func(*http.Request) (string, bool, error) { return tenant, false, nil }
	}
	srv := &http.Server{
		Handler:           httpapi.New(e, opts),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		WriteTimeout:      time.Minute,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	logger.Info("durable serve: listening", "addr", "http://"+ln.Addr().String(), "schema", o.db.schema,
		"auth", o.token != "", "tenant", o.tenant)

	select {
	case err := <-served:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	logger.Info("durable serve: shutting down", "timeout", o.shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving: %w", err)
	}
	logger.Info("durable serve: stopped")
	return nil
}
