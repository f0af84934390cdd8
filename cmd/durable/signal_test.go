package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/internal/tools/clitest"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
)

// Exit statuses hold at every moment: SIGTERM stops "worker" and "serve"
// with status 0 while they connect, migrate, register or drain, and the
// schema is then either fully migrated or untouched (the migrations run
// in one transaction, which the signal rolls back). "migrate up"
// interrupted exits 130, its transaction rolled back. Each moment is
// reached by blocking the process there (a database that accepts the
// connection and never answers, a lock the test holds), not by a sleep.

// start starts exe with args (see clitest.Start).
func start(t *testing.T, exe string, args ...string) *clitest.Proc {
	t.Helper()
	return clitest.Start(t, exec.Command(exe, args...))
}

// signalWait bounds how long a stopped process may take to exit.
const signalWait = 60 * time.Second

// waitBlocked waits until a session of the database waits for a lock in
// a statement that names schema: the process is blocked there.
func waitBlocked(t *testing.T, pool *pgxpool.Pool, p *clitest.Proc, schema string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var n int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND datname = current_database() AND pid <> pg_backend_pid()
  AND strpos(query, $1) > 0`, schema).Scan(&n))
		if n > 0 {
			return
		}
		select {
		case <-p.Exited:
			t.Fatalf("exited before blocking: %v\n%s", p.Err, p.Log.String())
		default:
		}
		require.True(t, time.Now().Before(deadline), "never blocked; output:\n%s", p.Log.String())
		time.Sleep(20 * time.Millisecond) // polling another process's progress
	}
}

// silentDB is a TCP server that accepts connections and never answers:
// a database that a process connects to for ever. accepted receives each
// connection.
func silentDB(t *testing.T) (url string, accepted <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ch := make(chan struct{}, 16)
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return "postgres://nobody@" + ln.Addr().String() + "/none?sslmode=disable&connect_timeout=120", ch
}

// tableExists reports whether schema.table exists.
func tableExists(t *testing.T, pool *pgxpool.Pool, schema, table string) bool {
	t.Helper()
	var ok bool
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT to_regclass($1) IS NOT NULL",
		pgx.Identifier{schema, table}.Sanitize()).Scan(&ok))
	return ok
}

func TestSignalWhileConnecting(t *testing.T) {
	t.Parallel()
	exe := clitest.Build(t, ".", ".", "durable")
	for _, tc := range []struct {
		cmd []string
		sig os.Signal
	}{
		{[]string{"worker"}, syscall.SIGTERM},
		{[]string{"worker"}, syscall.SIGINT},
		{[]string{"serve", "--addr", "127.0.0.1:0"}, syscall.SIGTERM},
	} {
		cmd := tc.cmd
		t.Run(cmd[0]+" "+tc.sig.String(), func(t *testing.T) {
			url, accepted := silentDB(t)
			p := start(t, exe, append(cmd, "--database-url", url)...)
			select {
			case <-accepted:
			case <-p.Exited:
				t.Fatalf("exited before connecting: %v\n%s", p.Err, p.Log.String())
			case <-time.After(60 * time.Second):
				t.Fatalf("never connected; output:\n%s", p.Log.String())
			}
			require.Equal(t, 0, p.Stop(t, tc.sig, signalWait), p.Log.String())
			require.Contains(t, p.Log.String(), "stopped by a signal")
			require.NotContains(t, p.Log.String(), "ERROR")
		})
	}
}

// blockMigration makes the schema, then holds a lock on the name of a
// table of migration 006 (schedules) in a transaction: a migration of
// the schema applies 001-005 in its transaction, then waits. Roll the
// returned transaction back to let go.
func blockMigration(t *testing.T, pool *pgxpool.Pool, schema string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize())
	require.NoError(t, err)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(ctx) }) // before the schema is dropped
	_, err = tx.Exec(ctx, "CREATE TABLE "+pgx.Identifier{schema, "schedules"}.Sanitize()+" (x int)")
	require.NoError(t, err)
	return tx
}

func TestSignalWhileMigrating(t *testing.T) {
	t.Parallel()
	exe := clitest.Build(t, ".", ".", "durable")
	pool := pgtest.Pool(t)
	for _, tc := range []struct {
		name string
		args []string
		want int
	}{
		{"worker", []string{"worker"}, 0},
		{"migrate up", []string{"migrate", "up"}, 130},
	} {
		t.Run(tc.name, func(t *testing.T) {
			schema := pgtest.EmptySchema(t, pool)
			tx := blockMigration(t, pool, schema)
			p := start(t, exe, append(tc.args, "--database-url", pgtest.URL(t), "--schema", schema)...)
			waitBlocked(t, pool, p, schema)
			require.Equal(t, tc.want, p.Stop(t, syscall.SIGTERM, signalWait), p.Log.String())
			require.NoError(t, tx.Rollback(context.Background()))
			// Untouched: the migrations 001-005 it had applied rolled back
			// with it.
			for _, table := range []string{"migrations", "runs", "tasks", "rate_limits"} {
				require.False(t, tableExists(t, pool, schema, table), "%s left behind; output:\n%s", table, p.Log.String())
			}
			if tc.want == 0 {
				require.NotContains(t, p.Log.String(), "ERROR")
			} else {
				require.Contains(t, p.Log.String(), "interrupted by a signal")
			}

			// Fully migrated when it is let through.
			out, err := exec.Command(exe, "migrate", "up", "--database-url", pgtest.URL(t), "--schema", schema).CombinedOutput()
			require.NoError(t, err, "%s", out)
			require.True(t, tableExists(t, pool, schema, "schedules"))
		})
	}
}

func TestSignalWhileRegistering(t *testing.T) {
	t.Parallel()
	exe := clitest.Build(t, ".", ".", "durable")
	p := newPG(t, true)
	pool := pgtest.Pool(t)
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(ctx) }) // before the schema is dropped
	_, err = tx.Exec(ctx, "LOCK TABLE "+pgx.Identifier{p.Schema, "workers"}.Sanitize()+" IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)

	w := start(t, exe, p.Flags("worker", "--worker-id", "stopped-while-registering")...)
	waitBlocked(t, pool, w, p.Schema)
	require.NoError(t, w.Cmd.Process.Signal(syscall.SIGTERM))
	// The signal is taken while the registration waits; the stop then
	// removes what it registered, which needs the table: let it go.
	w.Log.WaitFor(t, "durable worker: draining", 60*time.Second)
	require.NoError(t, tx.Rollback(ctx))
	require.Equal(t, 0, w.Wait(t, signalWait), w.Log.String())
	require.NotContains(t, w.Log.String(), "ERROR")
	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{p.Schema, "workers"}.Sanitize()+
		" WHERE id = 'stopped-while-registering'").Scan(&n))
	require.Zero(t, n, "a stopped worker leaves no record")
}

func TestSignalWhileServing(t *testing.T) {
	t.Parallel()
	exe := clitest.Build(t, ".", ".", "durable")
	p := newPG(t, true)
	w := start(t, exe, p.Flags("worker")...)
	w.Log.WaitFor(t, "durable worker: serving", 60*time.Second)
	require.Equal(t, 0, w.Stop(t, syscall.SIGTERM, signalWait), w.Log.String())
	require.True(t, strings.Contains(w.Log.String(), "durable worker: stopped"), w.Log.String())
}
