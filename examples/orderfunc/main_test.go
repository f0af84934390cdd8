package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/tools/clitest"
	"github.com/effectivelabs/durable/internal/tools/pgtest"
)

// These tests build the example into a binary, as a user builds their own,
// and run its command line against PostgreSQL.

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.ClosePool()
	pgtest.NoteSkipped()
	os.Exit(code)
}

// app is the built example and the schema it works on.
type app struct {
	exe string
	pg  *clitest.PG
}

func newApp(t *testing.T) *app {
	t.Helper()
	pg := clitest.NewPG(t, false) // "migrate up" creates it
	return &app{exe: clitest.Build(t, ".", ".", "orderfunc"), pg: pg}
}

// run runs the example with args and the database flags, and returns its
// exit status and output.
func (a *app) run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(a.exe, append(args, "--database-url", a.pg.URL, "--schema", a.pg.Schema)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else {
		require.NoError(t, err)
	}
	return code, stdout.String(), stderr.String()
}

// receipt reads the receipt a checkout run returned.
func (a *app) receipt(t *testing.T, out string) (*durable.RunResult, Receipt) {
	t.Helper()
	id := clitest.ParseIDs(t, out, 1)[0]
	e, err := durable.New(a.pg.Store, durable.Config{Logger: clitest.QuietLogger()})
	require.NoError(t, err)
	res, err := e.Get(t.Context(), id)
	require.NoError(t, err)
	r, err := checkoutFunction(a.pg.Schema, time.Hour, receiptFunction()).Output(res)
	require.NoError(t, err, "run %s: %v", id, res.Err)
	return res, r
}

const teaOrder = `{"id":"o-1","email":"ada@example.com","lines":[{"sku":"tea","qty":2,"cents":450},{"sku":"pot","qty":1,"cents":2500}]}`

// TestOrderFuncApp: the order flow, written as a function, runs on the
// example's own worker: lines reserved in parallel, a charge retried, the
// payment awaited (sent before the wait, found by its lookback), one row
// written in the step's transaction, the receipt mailed by a child run; an
// order whose payment never comes is refunded when its wait times out; a
// bad line fails the run; the worker drains on SIGTERM.
func TestOrderFuncApp(t *testing.T) {
	t.Parallel()
	a := newApp(t)

	code, out, errOut := a.run(t, "migrate", "up")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "applied migration 001")

	worker := clitest.Start(t, exec.Command(a.exe, "worker", "--worker-id", "orders-1", "--drain-timeout", "20s",
		"--payment-timeout", "2s", "--database-url", a.pg.URL, "--schema", a.pg.Schema))
	worker.Log.WaitFor(t, "orderfunc worker: serving", 60*time.Second)
	require.Contains(t, worker.Log.String(), "checkout")

	// The bank confirms before the run waits: the wait's lookback finds it.
	code, out, errOut = a.run(t, "events", "send", "--key", "paid:o-1", "--payload", `{"by":"bank-transfer"}`)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "delivered to 0 waiting steps")
	code, out, errOut = a.run(t, "trigger", "--workflow", "checkout", "--input", teaOrder, "--wait", "--timeout", "60s")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	id := clitest.ParseIDs(t, out, 1)[0]
	require.Regexp(t, `(?m)^`+id.String()+` COMPLETED in \S+$`, out)
	res, r := a.receipt(t, out)
	require.Equal(t, Receipt{Order: "o-1", Status: "paid", Cents: 3400, Charge: "ch_o-1_3400", PaidBy: "bank-transfer",
		Mail: "mailed: Order o-1: 3400 cents, ch_o-1_3400, paid by bank-transfer"}, r)
	var names []string
	for _, s := range res.Steps {
		names = append(names, s.Name)
	}
	require.Equal(t, []string{"main", "reserve#0", "reserve#1", "charge#2", "await-payment#3", "record-order#4", "send-receipt#5"}, names)
	charge, _ := res.Step("charge#2")
	require.Equal(t, 2, charge.Attempts, "the charge was retried once")
	child, _ := res.Step("send-receipt#5")
	require.NotZero(t, child.ChildRunID)

	var rows int
	require.NoError(t, pgtest.Pool(t).QueryRow(t.Context(),
		"SELECT count(*) FROM "+pgx.Identifier{a.pg.Schema, "orderfunc_orders"}.Sanitize()+" WHERE order_id = 'o-1' AND paid_by = 'bank-transfer'").Scan(&rows))
	require.Equal(t, 1, rows, "the order is recorded once, with the step")

	code, out, errOut = a.run(t, "runs", "show", id.String())
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^workflow\s+checkout$`, out)

	// No payment: the wait times out after --payment-timeout, and the
	// function refunds.
	code, out, errOut = a.run(t, "trigger", "--workflow", "checkout", "--input",
		`{"id":"o-2","email":"bob@example.com","lines":[{"sku":"tea","qty":1,"cents":450}]}`, "--wait", "--timeout", "60s")
	require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	res, r = a.receipt(t, out)
	require.Equal(t, Receipt{Order: "o-2", Status: "refunded", Cents: 450, Charge: "ch_o-2_450"}, r)
	wait, _ := res.Step("await-payment#2")
	require.Equal(t, durabletype.TaskFailed, wait.State)
	require.Contains(t, wait.Error, "wait timed out")

	// A line the reservation refuses: the step fails for good, and the
	// function returns its *StepError, which fails the run.
	code, out, _ = a.run(t, "trigger", "--workflow", "checkout", "--input",
		`{"id":"o-3","email":"eve@example.com","lines":[{"sku":"tea","qty":0,"cents":450}]}`, "--wait", "--timeout", "60s")
	require.Equal(t, 1, code)
	require.Contains(t, out, "FAILED in")
	require.Regexp(t, regexp.MustCompile(`call "reserve" failed: line tea: quantity 0`), out)

	// SIGTERM drains the worker, which exits 0.
	require.Equal(t, 0, worker.Stop(t, syscall.SIGTERM, 30*time.Second), worker.Log.String())
	require.Contains(t, worker.Log.String(), "orderfunc worker: stopped")
}

// TestOrderFuncHelp: the example's help lists its function and its flag;
// a bad --payment-timeout is a usage error. No database needed.
func TestOrderFuncHelp(t *testing.T) {
	t.Parallel()
	exe := clitest.Build(t, ".", ".", "orderfunc")
	out, err := exec.Command(exe, "worker", "-h").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "Usage: orderfunc worker")
	require.Contains(t, string(out), "-payment-timeout")
	require.Contains(t, string(out), "checkout")

	cmd := exec.Command(exe, "trigger", "--workflow", "checkout", "--input", teaOrder, "--payment-timeout", "-1s",
		"--database-url", "postgres://nobody@127.0.0.1:1/none")
	out, err = cmd.CombinedOutput()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "%v: %s", err, out)
	require.Equal(t, 2, exit.ExitCode(), "%s", out)
	require.Contains(t, string(out), "--payment-timeout -1s: it must be positive")
}
