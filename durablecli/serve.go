package durablecli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/httpapi"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/internal/tools/cliflag"
	"github.com/effectivelabs/durable/pgstore"
)

const serveUsage = `Usage: {name} serve --database-url URL [--addr 127.0.0.1:8080] [--token T] [flags]

Serves the HTTP API (see docs/http-api.md; the OpenAPI document is at
/api/v1/openapi.json) on --addr until SIGTERM or SIGINT, then stops
accepting connections and lets requests in flight finish for up to
--shutdown-timeout. It lists, shows, cancels and replays runs, sends events
and signals, and triggers the workflows of this program (those "{name}
worker" serves, listed below) by name; it executes no step: "{name}
worker" processes do.
/healthz answers while the process is up, /readyz while PostgreSQL answers
and the schema is current (this command does not migrate it). The web
dashboard is at / (runs, their DAGs, attempts and events, cancel and
replay, the live workers, queue depths); it asks for the token.

Every request but /healthz and /readyz must carry "Authorization: Bearer
<token>", the token given by --token or, better (a flag is visible to other
users in the process list), by $DURABLE_API_TOKEN; neither the help nor
the logs show it. Without a token the API
is served only on a loopback address, unless --no-auth says that something
in front of it authenticates. --tenant scopes the whole API to one tenant:
other tenants' runs are not found, and runs are triggered for that tenant.
The workers (/api/v1/workers) are shown whatever the tenant.

Exit status: 0 stopped (by SIGTERM or SIGINT, at any moment, its start
included), 1 failed (could not connect or listen), 2 bad flags.

Flags:
`

// envAPIToken supplies the default of --token.
const envAPIToken = "DURABLE_API_TOKEN"

// serveOptions are the flags of "serve".
type serveOptions struct {
	db              *cliflag.DB
	addr            string
	token           cliflag.Secret
	noAuth          bool
	tenant          string
	maxBody         int64
	dashboard       bool
	shutdownTimeout time.Duration
	logFormat       string
	logLevel        string
}

func (c *cli) serveCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o serveOptions
	fs := c.flagSet("serve", c.withWorkflows(serveUsage, false), stderr)
	o.db = c.dbFlags(fs)
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8080", "address to listen on, host:port (port 0: any free port)")
	cliflag.SecretVar(fs, &o.token, "token", envAPIToken, "bearer `token` every API request must carry", cliflag.Hidden)
	c.redact.Watch(&o.token)
	fs.BoolVar(&o.noAuth, "no-auth", false, "serve without a token on any address (authentication is done in front)")
	fs.StringVar(&o.tenant, "tenant", "", "scope the API to this tenant (default: every tenant)")
	fs.BoolVar(&o.dashboard, "dashboard", true, "serve the web dashboard at / (--dashboard=false: the API only)")
	fs.Int64Var(&o.maxBody, "max-body", httpapi.DefaultMaxBodyBytes, "largest request body in bytes")
	fs.DurationVar(&o.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long requests in flight may finish after SIGTERM")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	wf := c.workflowFlags("serve", fs)
	if code := c.parseFlags(fs, args, stderr, 0); code >= 0 {
		return code
	}
	prefix := c.name + " serve"
	logger, err := newLogger(stderr, o.logFormat, o.logLevel)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prefix, err)
		return exitUsage
	}
	if o.db.URL() == "" {
		fmt.Fprintf(stderr, "%s: %s\n", prefix, missingURL)
		return exitUsage
	}
	if err := checkValues(opt(dag.TenantRule, "--tenant", o.tenant)); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prefix, err)
		return exitUsage
	}
	if o.maxBody < 1 {
		fmt.Fprintf(stderr, "%s: --max-body must be positive, got %d\n", prefix, o.maxBody)
		return exitUsage
	}
	if o.token.Value() == "" && !o.noAuth && !loopback(o.addr) {
		fmt.Fprintf(stderr, "%s: --addr %s is not a loopback address: set --token (or $%s), or --no-auth if something in front authenticates\n",
			prefix, o.addr, envAPIToken)
		return exitUsage
	}
	err = c.runServe(ctx, &o, wf, logger)
	var le *loadErr
	switch {
	case errors.As(err, &le) && le.usage:
		fmt.Fprintf(stderr, "%s: %v\n", prefix, le.err)
		return exitUsage
	case err != nil && ctx.Err() != nil:
		logger.Warn(prefix+": stopped by a signal", "during", err.Error())
		return 0
	case err != nil:
		logger.Error(prefix + ": " + err.Error())
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

func (c *cli) runServe(ctx context.Context, o *serveOptions, wf *workflowFlags, logger *slog.Logger) error {
	prefix := c.name + " serve"
	pool, err := o.db.NewPool(8)
	if err != nil {
		return err
	}
	defer pool.Close()
	set, le := c.workflows(ctx, wf, pool, o.db.Schema)
	if le != nil {
		return le
	}
	if err := o.db.Ping(ctx, pool); err != nil {
		return err
	}
	scfg, err := o.db.StoreConfig()
	if err != nil {
		return err
	}
	s, err := pgstore.New(pool, scfg)
	if err != nil {
		return err
	}
	// A client engine, never started: it triggers and operates runs, and
	// knows the program's workflows to trigger them by name and draw them.
	e, err := durable.New(s, c.engineConfig(durable.Config{Logger: logger}))
	if err != nil {
		return err
	}
	if err := e.Register(set.defs...); err != nil {
		return err
	}
	opts := httpapi.Options{Logger: logger, MaxBodyBytes: o.maxBody, Dashboard: o.dashboard}
	if o.token.Value() != "" {
		opts.Authenticate = httpapi.BearerToken(o.token.Value())
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
	logger.Info(prefix+": listening", "addr", "http://"+ln.Addr().String(), "schema", o.db.Schema,
		"auth", o.token.Value() != "", "tenant", o.tenant, "workflows", strings.Join(set.names(), ","))

	select {
	case err := <-served:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	logger.Info(prefix+": shutting down", "timeout", o.shutdownTimeout)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving: %w", err)
	}
	logger.Info(prefix + ": stopped")
	return nil
}
