package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/cmd/durable/internal/demo"
	"github.com/effectivelabs/durable/cmd/durable/internal/workloads"
	"github.com/effectivelabs/durable/durablecli"
)

// The built-in workflows, their default inputs, and the flags of this
// binary's own that shape them: --fraud-window (worker, trigger) and
// --record-executions (worker).

// defaultFraudWindow is the order-processing demo's sleep by default.
const defaultFraudWindow = 2 * time.Second

func workloadOptions() workloads.Options {
	return workloads.Options{FraudWindow: defaultFraudWindow}
}

// builtin returns the built-in workflows that runs start from (their child
// workflows are registered with them) and each one's default input: a
// valid order for order-processing, {"n":0} for chaos and the crash-fn
// functions (a function's child is registered beside it), 0 for
// the bench-* workflows and steady (and crash-poison, served only with a
// recorder).
func builtin(o workloads.Options) ([]durable.Definition, []durablecli.Input) {
	set := workloads.New(o)
	defs := []durable.Definition{set.Demo.Workflow, set.Noop, set.DAG, set.BenchFunc, set.Chain, set.Keyed, set.Map,
		set.Wait, set.Parent, set.Chaos, set.Steady, set.Func, set.FuncChild}
	inputs := []durablecli.Input{
		durablecli.DefaultInput(set.Demo.Workflow, demo.Order{ID: "cli-1", Customer: "cli", Cents: 4200, Items: []string{"keyboard"}}),
		durablecli.DefaultInput(set.Noop, 0),
		durablecli.DefaultInput(set.DAG, 0),
		durablecli.DefaultInput(set.BenchFunc.Workflow, 0),
		durablecli.DefaultInput(set.Chain, 0),
		durablecli.DefaultInput(set.Keyed, 0),
		durablecli.DefaultInput(set.Map, 0),
		durablecli.DefaultInput(set.Wait, 0),
		durablecli.DefaultInput(set.Parent, 0),
		durablecli.DefaultInput(set.Chaos, workloads.ChaosInput{}),
		durablecli.DefaultInput(set.Steady, 0),
		durablecli.DefaultInput(set.Func.Workflow, workloads.FuncInput{}),
		durablecli.DefaultInput(set.FuncChild.Workflow, workloads.FuncInput{}),
	}
	if o.Record != nil {
		// The poison step ends the process that runs it: served only by
		// crash tests' workers.
		defs = append(defs, set.Poison)
		inputs = append(inputs, durablecli.DefaultInput(set.Poison, 0))
	}
	return defs, inputs
}

// builtinFlags adds --fraud-window to "worker" and "trigger" and
// --record-executions to "worker", and builds the workflows with them.
func builtinFlags(command string, fs *flag.FlagSet) durablecli.Load {
	o := workloadOptions()
	var record bool
	switch command {
	case "worker":
		fs.DurationVar(&o.FraudWindow, "fraud-window", defaultFraudWindow, "the order-processing demo's sleep, for runs triggered by this process")
		fs.BoolVar(&record, "record-executions", false, "record every execution of a chaos or steady step in <schema>.chaos_executions and of a crash-fn step in <schema>.fn_executions, write crash-fn's transactional rows to <schema>.fn_effects, and serve crash-poison, whose step ends its process (for crash tests)")
	case "trigger":
		fs.DurationVar(&o.FraudWindow, "fraud-window", defaultFraudWindow, "order-processing's durable sleep, recorded in the runs started here")
	}
	return func(ctx context.Context, db durablecli.DB) ([]durable.Definition, []durablecli.Input, error) {
		if o.FraudWindow <= 0 {
			return nil, nil, durablecli.UsageErrorf("--fraud-window must be positive, got %s", o.FraudWindow)
		}
		if record {
			var err error
			if o.Record, err = executionRecorder(ctx, db.Pool, db.Schema); err != nil {
				return nil, nil, err
			}
			if o.FuncRecord, o.FuncTx, err = funcRecorder(ctx, db.Pool, db.Schema); err != nil {
				return nil, nil, err
			}
		}
		defs, inputs := builtin(o)
		return defs, inputs, nil
	}
}

// executionRecorder creates <schema>.chaos_executions (and the schema) if
// needed and returns a recorder inserting one row per chaos step
// execution. It runs before the worker migrates the schema.
func executionRecorder(ctx context.Context, pool *pgxpool.Pool, schema string) (workloads.Recorder, error) {
	table := pgx.Identifier{schema, "chaos_executions"}.Sanitize()
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, table); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{schema}.Sanitize()); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (
			run_id uuid NOT NULL, step text NOT NULL, attempt int NOT NULL, worker text NOT NULL,
			at timestamptz NOT NULL DEFAULT clock_timestamp())`)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("creating %s: %w", table, err)
	}
	insert := `INSERT INTO ` + table + ` (run_id, step, attempt, worker) VALUES ($1, $2, $3, $4)`
	return func(sc durable.Context) error {
		_, err := pool.Exec(sc, insert, sc.RunID(), sc.StepName(), sc.Attempt(), sc.WorkerID())
		return err
	}, nil
}

// funcTables returns the statements that create the tables of the
// crash-fn functions' crash proof in schema: fn_executions (a row per
// execution of a step, with its nonce, written before it works),
// fn_effects (the row of crash-fn's transactional step, written through
// the step's transaction; deliberately without a unique key, so that
// duplicates show) and fn_writes (each execution that wrote that row,
// written outside the transaction, so that rolled-back writes show).
func funcTables(schema string) []string {
	var stmts []string
	for _, name := range []string{"fn_executions", "fn_effects", "fn_writes"} {
		stmts = append(stmts, `CREATE TABLE IF NOT EXISTS `+pgx.Identifier{schema, name}.Sanitize()+` (
			run_id uuid NOT NULL, call text NOT NULL, attempt int NOT NULL, worker text NOT NULL, nonce text NOT NULL,
			at timestamptz NOT NULL DEFAULT clock_timestamp())`)
	}
	return stmts
}

// funcRecorder creates the tables of funcTables (and the schema) if needed
// and returns a recorder inserting a row into fn_executions per execution
// of a crash-fn step, and the writer of crash-fn's transactional row. It
// runs before the worker migrates the schema.
func funcRecorder(ctx context.Context, pool *pgxpool.Pool, schema string) (workloads.FuncRecorder, workloads.FuncTxWriter, error) {
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, schema+".fn_tables"); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{schema}.Sanitize()); err != nil {
			return err
		}
		for _, stmt := range funcTables(schema) {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("creating the crash-fn tables in %s: %w", schema, err)
	}
	insert := func(table string) string {
		return `INSERT INTO ` + pgx.Identifier{schema, table}.Sanitize() + ` (run_id, call, attempt, worker, nonce) VALUES ($1, $2, $3, $4, $5)`
	}
	execs, effects, writes := insert("fn_executions"), insert("fn_effects"), insert("fn_writes")
	rec := func(sc durable.Context, nonce string) error {
		_, err := pool.Exec(sc, execs, sc.RunID(), sc.StepName(), sc.Attempt(), sc.WorkerID(), nonce)
		return err
	}
	write := func(sc durable.Context, tx any, nonce string) error {
		ptx, ok := tx.(pgx.Tx)
		if !ok {
			return durable.Terminal(fmt.Errorf("crash-fn: the step's transaction is a %T, not a pgx.Tx", tx))
		}
		args := []any{sc.RunID(), sc.StepName(), sc.Attempt(), sc.WorkerID(), nonce}
		if _, err := ptx.Exec(sc, effects, args...); err != nil {
			return err
		}
		_, err := pool.Exec(sc, writes, args...)
		return err
	}
	return rec, write, nil
}
