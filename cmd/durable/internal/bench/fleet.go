package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/cmd/durable/internal/workloads"
	"github.com/effectivelabs/durable/pgstore"
	"github.com/effectivelabs/durable/store"
)

// fleet is the workers of a scenario: engines in this process, or `durable
// worker` processes.
type fleet struct {
	b   *bencher
	ids []string

	engines  []*durable.Engine
	pools    []*pgxpool.Pool
	counters []*Counter

	procs []*proc
}

type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // its exit status, once done
}

// workerSpec is what one start of workers asks for.
type workerSpec struct {
	n, concurrency, claimBatch, finishBatch int
	name                                    string // distinguishes fleets of one scenario
	// retention is each engine's Config.Retention (0: the engine's
	// default); in-process only.
	retention time.Duration
	// extra, if set, returns more workflows for each engine to serve
	// besides the built-ins; in-process only.
	extra func() []durable.Definition
	// bySQL counts each engine's statements by their text (Counter.BySQL).
	bySQL bool
}

// startFleet starts n workers; with processes, claimBatch must be the
// engine's default for concurrency and finishBatch 0.
//
// With the engine's default retention, the history's next periods are made
// first, as the leader of a deployment that has been running has made
// them: the first leader of a fresh schema makes them at its start, a
// second of work once in the life of a database, which would otherwise
// fall in the seconds a scenario measures (docs/performance.md).
func (b *bencher) startFleet(ctx context.Context, spec workerSpec) (*fleet, error) {
	if spec.retention == 0 {
		if _, err := b.clientStore.PruneRuns(ctx, &store.PruneRunsParams{OlderThan: durable.DefaultRetention, Limit: 500, Lazy: true}); err != nil {
			return nil, fmt.Errorf("making the history's periods: %w", err)
		}
	}
	f := &fleet{b: b}
	for i := range spec.n {
		f.ids = append(f.ids, fmt.Sprintf("bench-%s-%s%d", b.tag, spec.name, i+1))
	}
	var err error
	if b.o.Processes > 0 {
		err = f.startProcesses(spec)
	} else {
		err = f.startEngines(ctx, spec)
	}
	if err != nil {
		f.stop()
		return nil, err
	}
	b.logf("started %d %s worker(s), concurrency %d", spec.n, b.mode(), spec.concurrency)
	return f, nil
}

func (b *bencher) mode() string {
	if b.o.Processes > 0 {
		return ModeProcesses
	}
	return ModeInProcess
}

// poolSize is what `durable worker` uses for a concurrency.
func poolSize(concurrency int) int32 { return int32(min(concurrency/4+4, 32)) }

func (f *fleet) startEngines(ctx context.Context, spec workerSpec) error {
	for _, id := range f.ids {
		cfg, err := f.b.poolConfig(f.b.workerRole(id), poolSize(spec.concurrency))
		if err != nil {
			return err
		}
		// The store's listener and elector connections copy this config,
		// so the hook sees every connection of the worker.
		cfg.ConnConfig.AfterConnect = f.b.pids.hook(id, cfg.ConnConfig.AfterConnect)
		c := &Counter{BySQL: spec.bySQL}
		c.Instrument(cfg)
		pool, err := connectPool(ctx, cfg)
		if err != nil {
			return err
		}
		f.pools = append(f.pools, pool)
		f.counters = append(f.counters, c)
		s, err := pgstore.New(pool, &pgstore.Config{Schema: f.b.schema})
		if err != nil {
			return err
		}
		e, err := durable.New(s, durable.Config{
			WorkerID: id, Concurrency: spec.concurrency, ClaimBatch: spec.claimBatch,
			FinishBatch: spec.finishBatch, Logger: f.b.logger, Retention: spec.retention,
		})
		if err != nil {
			return err
		}
		defs := workloads.New(workloads.Options{}).All()
		if spec.extra != nil {
			defs = append(defs, spec.extra()...)
		}
		if err := e.Register(defs...); err != nil {
			return err
		}
		if err := e.Start(ctx); err != nil {
			return err
		}
		f.engines = append(f.engines, e)
	}
	return nil
}

// totals sums the in-process workers' counts (none for processes), and
// their statements by text when counted (workerSpec.bySQL).
func (f *fleet) totals() (Counts, []StatementCount) {
	var sum Counts
	by := map[string]int64{}
	for _, c := range f.counters {
		n := c.Counts()
		sum.Statements += n.Statements
		sum.RoundTrips += n.RoundTrips
		sum.Pings += n.Pings
		sum.Transactions += n.Transactions
		for _, st := range c.Statements() {
			by[st.SQL] += st.N
		}
	}
	out := make([]StatementCount, 0, len(by))
	for k, n := range by {
		out = append(out, StatementCount{SQL: k, N: n})
	}
	slices.SortFunc(out, func(a, b StatementCount) int { return cmp.Or(cmp.Compare(b.N, a.N), cmp.Compare(a.SQL, b.SQL)) })
	return sum, out
}

func (f *fleet) startProcesses(spec workerSpec) error {
	if spec.finishBatch != 0 || (spec.claimBatch != 0 && spec.claimBatch != min(spec.concurrency, 200)) {
		return errors.New("bench: worker processes cannot take a claim or finish batch")
	}
	if spec.retention != 0 || spec.extra != nil {
		return errors.New("bench: worker processes cannot take a retention or workflows of the bench's own")
	}
	for _, id := range f.ids {
		cmd := exec.Command(f.b.o.WorkerExe, "worker",
			"--database-url", f.b.workerURL(id), "--schema", f.b.schema,
			"--concurrency", strconv.Itoa(spec.concurrency), "--worker-id", id,
			"--log-level", "warn")
		cmd.Stdout = f.b.logOut()
		cmd.Stderr = f.b.logOut()
		setParentDeathSignal(cmd)
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("starting worker process: %w", err)
		}
		p := &proc{cmd: cmd, done: make(chan struct{})}
		go func() {
			p.err = cmd.Wait()
			close(p.done)
		}()
		f.procs = append(f.procs, p)
	}
	return nil
}

// waitListening waits until every worker has its notification listener
// connected, so that work enqueued from now on wakes them at once.
func (f *fleet) waitListening(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	name := pgstore.ApplicationName(f.b.schema, "listener")
	for {
		var n int
		err := f.b.monitor.QueryRow(ctx,
			`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1`, name).Scan(&n)
		if err != nil {
			return fmt.Errorf("waiting for the workers to listen: %w", err)
		}
		if n >= len(f.ids) {
			return nil
		}
		for i, p := range f.procs {
			select {
			case <-p.done:
				return fmt.Errorf("worker process %s exited: %v", f.ids[i], p.err)
			default:
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the workers to listen (%d of %d): %w", n, len(f.ids), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop stops the workers gracefully (SIGTERM for processes, Stop for
// engines), in parallel, and waits for them.
func (f *fleet) stop() {
	var wg sync.WaitGroup
	for i, e := range f.engines {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := e.Stop(ctx); err != nil {
				f.b.logf("stopping worker %s: %v", f.ids[i], err)
			}
		})
	}
	for i, p := range f.procs {
		wg.Go(func() {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(45 * time.Second):
				f.b.logf("worker process %s did not stop in 45s; killing it", f.ids[i])
				_ = p.cmd.Process.Kill()
				<-p.done
			}
			if p.err != nil {
				f.b.logf("worker process %s: %v", f.ids[i], p.err)
			}
		})
	}
	wg.Wait()
	for _, p := range f.pools {
		p.Close()
	}
	f.engines, f.procs, f.pools = nil, nil, nil
}
