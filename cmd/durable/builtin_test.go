package main

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/cmd/durable/internal/workloads"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/tools/clitest"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
)

// The built-in workflows through the command line: their default inputs,
// and the flags of this binary's own (--fraud-window, --record-executions).

// testPG is a per-test schema (clitest.PG) with engines on it that know the
// built-in workflows.
type testPG struct{ *clitest.PG }

// newPG is clitest.NewPG.
func newPG(t *testing.T, migrate bool) *testPG { return &testPG{clitest.NewPG(t, migrate)} }

// Client returns an engine on the schema that is never started.
func (p *testPG) Client(t *testing.T) *durable.Engine {
	t.Helper()
	e, err := durable.New(p.Store, durable.Config{Logger: clitest.QuietLogger()})
	require.NoError(t, err)
	return e
}

// StartWorker starts an in-process engine serving the built-in workflows
// on the schema, stopped when the test ends.
func (p *testPG) StartWorker(t *testing.T) *durable.Engine {
	t.Helper()
	e, err := durable.New(p.Store, durable.Config{Logger: clitest.QuietLogger(), HeartbeatInterval: time.Second, DeadAfter: 5 * time.Second})
	require.NoError(t, err)
	require.NoError(t, e.Register(workloads.New(workloads.Options{}).All()...))
	require.NoError(t, e.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, e.Stop(ctx))
	})
	return e
}

// TestBuiltinWorkflows: every built-in workflow can be triggered without
// --input (its default input) and with an input of its type, and the
// input is checked before connecting: a database that cannot be reached is
// the first error of a valid command line.
func TestBuiltinWorkflows(t *testing.T) {
	t.Parallel()
	db := []string{"--database-url", "postgres://nobody@127.0.0.1:1/none?connect_timeout=5"}
	names := []string{"order-processing", "bench-noop", "bench-dag", "bench-func", "bench-chain", "bench-keyed", "bench-map",
		"bench-wait", "bench-parent", "chaos", "steady", "crash-fn", "crash-fn-child"}
	for _, name := range names {
		code, _, errOut := runCLI(t, append([]string{"trigger", "--workflow", name}, db...)...)
		require.Equal(t, 1, code, "%s: %s", name, errOut)
		require.Contains(t, errOut, "durable trigger: connecting", name)
	}
	for _, name := range []string{"bench-map", "bench-wait", "bench-parent", "chaos"} {
		code, _, errOut := runCLI(t, append([]string{"trigger", "--workflow", name, "--input", "3"}, db...)...)
		if name == "chaos" {
			require.Equal(t, 2, code, errOut)
			require.Contains(t, errOut, "--input for chaos: invalid JSON")
		} else {
			require.Equal(t, 1, code, "%s: %s", name, errOut)
		}
	}
	code, out, _ := runCLI(t, "help")
	require.Equal(t, 0, code)
	require.Contains(t, strings.Join(strings.Fields(out), " "), "Workflows: "+strings.Join(names, ", ")+" Run")

	code, _, errOut := runCLI(t, append([]string{"trigger", "--workflow", "nope"}, db...)...)
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `durable trigger: unknown workflow "nope": this program can start `+strings.Join(names, ", ")+"\n")

	for _, cmd := range [][]string{{"trigger", "--workflow", "bench-noop"}, {"worker"}} {
		code, out, errOut := runCLI(t, append(append(cmd, "--fraud-window", "-1s"), db...)...)
		require.Equal(t, 2, code, "%v: %s", cmd, errOut)
		require.Empty(t, out)
		require.Contains(t, errOut, "--fraud-window must be positive, got -1s", cmd)
	}
}

func TestTriggerWait(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	p.StartWorker(t)

	code, out, errOut := runCLI(t, p.Flags("trigger", "--workflow", "order-processing", "--count", "3",
		"--fraud-window", "100ms", "--wait", "--timeout", "60s")...)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	ids := clitest.ParseIDs(t, out, 3)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 6, "3 IDs, then 3 statuses:\n%s", out)
	for i, id := range ids {
		require.True(t, strings.HasPrefix(lines[3+i], id.String()+" COMPLETED in "), lines[3+i])
	}
	// The fraud window given to trigger is the one the runs sleep.
	evs, err := p.Client(t).Events(context.Background(), ids[0])
	require.NoError(t, err)
	var slept bool
	for _, ev := range evs {
		if ev.Type == durabletype.EventSleeping {
			slept = true
			require.Equal(t, 100*time.Millisecond, ev.DueAt.Sub(ev.At).Round(time.Millisecond))
		}
	}
	require.True(t, slept)

	// chaos waits for the event "chaos-3", looking back an hour: sent
	// first, it lets the run complete.
	code, out, errOut = runCLI(t, p.Flags("events", "send", "--key", "chaos-3")...)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	code, out, errOut = runCLI(t, p.Flags("trigger", "--workflow", "chaos", "--input", `{"n":3}`, "--wait", "--timeout", "60s")...)
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	id := clitest.ParseIDs(t, out, 1)[0]
	res, err := p.Client(t).Get(context.Background(), id)
	require.NoError(t, err)
	odd, _ := res.Step("odd")
	even, _ := res.Step("even")
	require.Equal(t, durabletype.TaskCompleted, odd.State, "n=3 takes the odd branch")
	require.Equal(t, durabletype.TaskSkipped, even.State)
}

// TestWorkerSecondSignal: a worker draining a step that cannot finish exits
// at once on a second signal. The step is a chaos step blocked in its
// execution recorder, whose insert waits for a table lock the test holds.
func TestWorkerSecondSignal(t *testing.T) {
	t.Parallel()
	p := newPG(t, true)
	exe := clitest.Build(t, ".", ".", "durable")

	out, err := exec.Command(exe, "version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "durable ")

	cmd := exec.Command(exe, p.Flags("worker", "--record-executions", "--drain-timeout", "5m", "--worker-id", "second-signal")...)
	// Through an io.Pipe, Wait returns only after all output was read.
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	require.NoError(t, cmd.Start())
	exited := make(chan struct{}) // closed when the worker has exited
	var exitErr error             // then its exit status
	go func() {
		exitErr = cmd.Wait()
		pw.Close()
		close(exited)
	}()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	log := clitest.NewLines(pr)
	log.WaitFor(t, "durable worker: serving", 30*time.Second)

	// Block every chaos step in its recorder: the worker created the table
	// before serving.
	pool := pgtest.Pool(t)
	tx, err := pool.Begin(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) }) // before the schema is dropped
	_, err = tx.Exec(context.Background(), "LOCK TABLE "+pgx.Identifier{p.Schema, "chaos_executions"}.Sanitize()+" IN EXCLUSIVE MODE")
	require.NoError(t, err)
	_, err = workloads.New(workloads.Options{}).Chaos.RunNoWait(context.Background(), p.Client(t), "t", workloads.ChaosInput{N: 1})
	require.NoError(t, err)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting int
		require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO ' || $1 || '%'`,
			pgx.Identifier{p.Schema, "chaos_executions"}.Sanitize()).Scan(&waiting))
		if waiting > 0 {
			break
		}
		require.True(t, time.Now().Before(deadline), "no step blocked in its recorder; worker output:\n%s", log.String())
		time.Sleep(20 * time.Millisecond) // polling another process's progress
	}

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	log.WaitFor(t, "durable worker: draining", 10*time.Second)
	select {
	case <-exited:
		t.Fatalf("the worker exited while its step could not finish: %v\n%s", exitErr, log.String())
	default:
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("the worker did not exit within 10s of the second signal; output:\n%s", log.String())
	}
	var status *exec.ExitError
	require.True(t, errors.As(exitErr, &status), "%v", exitErr)
	require.Equal(t, 130, status.ExitCode(), log.String())
	log.WaitFor(t, "second signal during the drain; exiting at once", 5*time.Second)
}

// TestBuiltinHelpHidesSecrets: this binary's own commands take the
// database URL as durablecli's do: the help shows it masked, once (bench
// printed it in clear, after "(default $DURABLE_DATABASE_URL)").
func TestBuiltinHelpHidesSecrets(t *testing.T) { // not parallel: it sets the environment
	t.Setenv("DURABLE_DATABASE_URL", "postgres://app:pa55-SECRET@db.example/prod")
	for _, cmd := range []string{"demo", "bench"} {
		code, out, errOut := runCLI(t, cmd, "-h")
		require.Equal(t, 0, code, errOut)
		require.NotContains(t, out+errOut, "pa55-SECRET", cmd)
		require.Contains(t, errOut, "(default $DURABLE_DATABASE_URL: postgres://app:xxxxx@db.example/prod)\n", cmd)
		require.Equal(t, 1, strings.Count(errOut, "(default $DURABLE_DATABASE_URL"), cmd)
	}
}
