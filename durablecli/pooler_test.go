package durablecli

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/internal/tools/clitest"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
)

// TestPoolerFlag: --pooler takes none, session or transaction, on every
// command that connects; anything else is a usage error.
func TestPoolerFlag(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"worker"}, {"runs", "list"}, {"trigger", "--workflow", "bench-noop"}, {"migrate", "up"}} {
		code, _, errOut := runCLI(t, append(args, "--pooler", "statement", "--database-url", "postgres://x@127.0.0.1:1/x")...)
		require.Equal(t, exitUsage, code, "%v: %s", args, errOut)
		require.Contains(t, errOut, `invalid pooler "statement": use none, session or transaction`, "%v", args)
	}
}

// TestWorkerBehindPgBouncer runs "worker --pooler transaction" with nothing
// but a URL through a real PgBouncer in transaction mode: it migrates the
// schema and serves; runs triggered through the pooler complete, a retry's
// backoff (a timer the leader fires, without notifications) included, and
// so does a run waiting for an event sent through the pooler; the worker
// logs no error and exits 0 on SIGTERM (its context here).
func TestWorkerBehindPgBouncer(t *testing.T) {
	t.Parallel()
	pooled := pgtest.PgBouncer(t, "transaction")
	p := newPG(t, false) // the worker migrates, through the pooler
	flags := func(args ...string) []string {
		return append(args, "--database-url", pooled, "--pooler", "transaction", "--schema", p.Schema)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	log := clitest.NewLines(pr)
	done := make(chan int, 1)
	go func() {
		var stdout strings.Builder
		done <- run(ctx, flags("worker", "--worker-id", "pooled"), &stdout, pw)
		pw.Close()
	}()
	log.WaitFor(t, "durable worker: serving", 30*time.Second)

	code, out, errOut := runCLI(t, flags("trigger", "--workflow", "order-processing", "--count", "3", "--wait", "--timeout", "1m")...)
	require.Equal(t, 0, code, "%s\n%s\nworker:\n%s", out, errOut, log.String())
	require.Equal(t, 3, strings.Count(out, "COMPLETED"), out)

	code, out, errOut = runCLI(t, flags("trigger", "--workflow", "bench-wait", "--input", "7")...)
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	id := clitest.ParseIDs(t, out, 1)[0]
	client := p.Client(t)
	require.Eventually(t, func() bool {
		res, err := client.Get(ctx, id)
		require.NoError(t, err)
		s, _ := res.Step("wait")
		return s != nil && s.State == "WAITING"
	}, time.Minute, 50*time.Millisecond, "the run waits for its event")
	code, out, errOut = runCLI(t, flags("events", "send", "--key", waitKey(7), "--payload", "1")...)
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	res, err := client.Wait(wctx, id)
	require.NoError(t, err)
	require.Equal(t, "COMPLETED", string(res.Status))

	cancel()
	require.Equal(t, 0, <-done, log.String())
	for _, bad := range []string{"level=ERROR", "prepared statement", "encode"} {
		require.NotContains(t, log.String(), bad)
	}
}
