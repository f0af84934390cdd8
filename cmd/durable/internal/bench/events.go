package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/cmd/durable/internal/workloads"
	"github.com/effectivelabs/durable/internal/core/sleep"
	"github.com/effectivelabs/durable/pgstore"
)

// DefaultSenders is how many goroutines the events scenario sends its
// events from unless Options.Senders says otherwise. SendEvents records a
// batch in one transaction, then applies it to the receiving runs, 256
// runs per transaction: one caller leaves the database waiting on its
// round trips and commits, a few keep it busy. Measured on a 2-core
// machine (100,000 waiting runs, 1,000 events per call): 1 sender 9,500
// events/s, 2 16,400, 4 18,300, 8 17,000.
const DefaultSenders = 4

// events runs the events scenario: Runs bench-wait runs, each waiting for
// its own event (workloads.WaitKey of its input), created while the
// workers run; once every wait task is WAITING, the workers' memory and
// goroutines are sampled at the start and at the end of a quiet period
// (Duration), to compare with a sample taken before the runs were created.
// Then every event is sent, SendBatch per SendEvents call from Senders
// goroutines. It reports the events delivered per second (from the first
// event recorded to the last run settled, database timestamps), the send
// calls' rate and latency, and checks that every run completed once with
// its own event's payload, and that the calls' delivered counts sum to
// Runs.
func (b *bencher) events(ctx context.Context, rep *Report) error {
	n, tenants := b.o.Runs, b.o.Tenants
	rep.Description = fmt.Sprintf("%s bench-wait runs, each waiting for its own event; once all wait, the workers idle %s, "+
		"then the events are sent, %s per SendEvents call from %d goroutines",
		FormatNumber(float64(n), 0), b.o.Duration, FormatNumber(float64(b.o.SendBatch), 0), b.o.Senders)
	tenantOf := func(i int) string { return b.tenant(fmt.Sprintf("t%d", i%tenants)) }

	f, err := b.startFleet(ctx, workerSpec{n: b.o.Workers, concurrency: b.o.Concurrency,
		claimBatch: b.o.ClaimBatch, finishBatch: b.o.FinishBatch, name: "w"})
	if err != nil {
		return err
	}
	defer f.stop()
	if err := f.waitListening(ctx); err != nil {
		return err
	}
	// Let the workers look at the empty queue and elect their leader.
	if !sleep.For(ctx, 2*time.Second) {
		return ctx.Err()
	}
	var samples []memSample
	sample := func(label string, waiting int) error {
		s, err := f.sample(label, waiting)
		if err != nil {
			return err
		}
		samples = append(samples, s)
		return nil
	}
	if err := sample("before the runs", 0); err != nil {
		return err
	}

	b.logf("inserting %d %s runs in batches of %d while the workers run", n, b.set.Wait.Name(), b.o.InsertBatch)
	start := time.Now()
	for done := 0; done < n; {
		k := min(b.o.InsertBatch, n-done)
		trig := make([]durable.Trigger[int], k)
		for i := range trig {
			trig[i] = durable.Trigger[int]{Tenant: tenantOf(done + i), Input: done + i}
		}
		if _, err := b.set.Wait.RunManyNoWait(ctx, b.client, trig); err != nil {
			return fmt.Errorf("inserting runs: %w", err)
		}
		done += k
	}
	insertTime := time.Since(start)
	b.logf("inserted %d runs in %.2fs", n, insertTime.Seconds())

	wctx, cancel := context.WithTimeout(ctx, b.o.Timeout)
	waiting, err := b.pollCount(wctx, "runs waiting", n, `SELECT count(*) FROM `+b.table("tasks")+
		` WHERE tenant LIKE $1 AND state = 'WAITING'`)
	cancel()
	toWaiting := time.Since(start)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		rep.Verified = false
		rep.Failure = fmt.Sprintf("timed out after %s: %d of %d runs waiting", b.o.Timeout, waiting, n)
		return nil
	}
	b.logf("all %d runs waiting %.2fs after the first insert; quiet for %s", n, toWaiting.Seconds(), b.o.Duration)
	if err := sample("all waiting, quiet period start", waiting); err != nil {
		return err
	}
	if !sleep.For(ctx, b.o.Duration) {
		return ctx.Err()
	}
	if err := b.monitor.QueryRow(ctx, `SELECT count(*) FROM `+b.table("tasks")+
		` WHERE tenant LIKE $1 AND state = 'WAITING'`, b.tenants("")).Scan(&waiting); err != nil {
		return err
	}
	if err := sample(fmt.Sprintf("quiet period end (+%s)", b.o.Duration), waiting); err != nil {
		return err
	}

	sent, err := b.sendAll(ctx, n, tenantOf)
	if err != nil {
		return err
	}
	b.logf("sent %d events in %d calls in %.2fs; %d delivered by the calls", n, sent.calls, sent.wall.Seconds(), sent.delivered)
	wctx, cancel = context.WithTimeout(ctx, b.o.Timeout)
	_, settleErr := b.pollCount(wctx, "runs settled", n, `SELECT count(*) FROM `+b.table("runs")+
		` WHERE tenant LIKE $1 AND finished_at IS NOT NULL`)
	cancel()
	f.stop()
	if settleErr != nil && ctx.Err() != nil {
		return ctx.Err()
	}

	var firstSent, lastSettled pgtype.Timestamptz
	var messages, runsDone, tasksDone, matching, maxAttempt, inbox int
	err = b.monitor.QueryRow(ctx, `
SELECT (SELECT min(sent_at) FROM `+b.table("messages")+` WHERE tenant LIKE $1 AND run_id IS NULL),
       (SELECT count(*) FROM `+b.table("messages")+` WHERE tenant LIKE $1 AND run_id IS NULL),
       (SELECT max(finished_at) FROM `+b.table("runs")+` WHERE tenant LIKE $1),
       (SELECT count(*) FROM `+b.table("runs")+` WHERE tenant LIKE $1 AND status = 'COMPLETED'),
       (SELECT count(*) FROM `+b.table("inbox")+`)`, b.tenants("")).Scan(&firstSent, &messages, &lastSettled, &runsDone, &inbox)
	if err != nil {
		return fmt.Errorf("reading the events: %w", err)
	}
	// A wait task's output is its event's payload, the run's input (both
	// the JSON of the run's number).
	err = b.monitor.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE t.state = 'COMPLETED'), count(*) FILTER (WHERE t.state = 'COMPLETED' AND t.output = r.input),
       coalesce(max(t.attempt), 0)
FROM `+b.table("tasks")+` t JOIN `+b.table("runs")+` r ON r.id = t.run_id
WHERE t.tenant LIKE $1 AND t.name = 'wait'`, b.tenants("")).Scan(&tasksDone, &matching, &maxAttempt)
	if err != nil {
		return fmt.Errorf("reading the wait tasks: %w", err)
	}

	secs := lastSettled.Time.Sub(firstSent.Time).Seconds()
	rate := 0.0
	if secs > 0 && firstSent.Valid && lastSettled.Valid {
		rate = float64(tasksDone) / secs
	}
	rep.Add("events_per_s", "events delivered, first event recorded → last run settled", rate, "events/s", 0)
	rep.Add("events_window_s", "that window (database timestamps)", secs, "s", 3)
	rep.Add("send_wall_per_s", "wall rate, first call → last call returned", float64(n)/sent.wall.Seconds(), "events/s", 0)
	rep.Add("send_calls_per_s", "SendEvents calls per second", float64(sent.calls)/sent.wall.Seconds(), "calls/s", 1)
	cs := Summarize(sent.callMS)
	rep.Add("send_call_p50_ms", "SendEvents call p50", cs.P50, "ms", 1)
	rep.Add("send_call_p99_ms", "SendEvents call p99", cs.P99, "ms", 1)
	rep.Add("delivered", "delivered, as the calls counted", float64(sent.delivered), "events", 0)
	rep.Add("insert_runs_per_s", "insert rate (RunManyNoWait, one inserter, workers running)", float64(n)/insertTime.Seconds(), "runs/s", 0)
	rep.Add("to_waiting_s", "first insert → every run waiting", toWaiting.Seconds(), "s", 3)
	addSamples(rep, samples)
	rep.Add("runs_completed", "runs completed", float64(runsDone), "runs", 0)
	rep.Add("waits_completed_own_payload", "wait tasks completed with their own event's payload", float64(matching), "tasks", 0)
	rep.Add("wait_attempts_max", "most attempts of a wait task", float64(maxAttempt), "attempts", 0)
	rep.Add("events_recorded", "events recorded", float64(messages), "events", 0)
	rep.Note("SendEvents records a batch in one transaction, then applies it to the receiving runs, up to 256 runs per transaction; the workers only claim the wait steps")
	if b.o.Processes == 0 {
		rep.Note("memory and goroutines are this process's, the in-process workers' and the bench's own (its client pools); " +
			"RSS is VmRSS as sampled, then after runtime.GC and debug.FreeOSMemory")
	} else {
		rep.Note("memory is the sum of the worker processes' VmRSS; their goroutines are not visible from here")
	}

	if sent.delivered < n && runsDone == n && matching == n {
		rep.Note("every run completed with its event, but the calls counted %s fewer deliveries: another engine applied "+
			"those messages (the leader's periodic pass applies pending inbox messages, those a SendEvents call has just "+
			"recorded and is applying included), and SendEvents counts only those it applied itself", FormatNumber(float64(n-sent.delivered), 0))
	}
	switch {
	case errors.Is(settleErr, context.DeadlineExceeded):
		rep.Verified = false
		rep.Failure = fmt.Sprintf("timed out after %s: %d of %d runs completed", b.o.Timeout, runsDone, n)
	case settleErr != nil:
		return settleErr
	case runsDone != n || tasksDone != n || matching != n:
		rep.Verified = false
		rep.Failure = fmt.Sprintf("%d of %d runs completed, %d wait tasks completed, %d with their own event's payload",
			runsDone, n, tasksDone, matching)
	case sent.delivered != n:
		rep.Verified = false
		rep.Failure = fmt.Sprintf("the SendEvents calls counted %d deliveries, want %d (every run completed)", sent.delivered, n)
	case messages != n || inbox != 0:
		rep.Verified = false
		rep.Failure = fmt.Sprintf("%d events recorded (want %d), %d messages left in the inbox", messages, n, inbox)
	}
	return nil
}

// pollCount polls query (its $1 the bench's tenants) until it counts want,
// logging progress every 5s, and returns the last count; ctx bounds it.
func (b *bencher) pollCount(ctx context.Context, what string, want int, query string) (int, error) {
	last := time.Now()
	for {
		var got int
		if err := b.monitor.QueryRow(ctx, query, b.tenants("")).Scan(&got); err != nil {
			return got, err
		}
		if got >= want {
			return got, nil
		}
		if time.Since(last) > 5*time.Second {
			b.logf("%s: %d of %d", what, got, want)
			last = time.Now()
		}
		if !sleep.For(ctx, 100*time.Millisecond) {
			return got, ctx.Err()
		}
	}
}

// sendResult is what the send calls saw.
type sendResult struct {
	calls, delivered int
	wall             time.Duration
	callMS           []float64
}

// sendAll sends the event of every run i < n (tenant tenantOf(i), key
// workloads.WaitKey(i), payload i) through an engine of its own (a pool of
// Senders+2 connections), SendBatch per call from Senders goroutines
// taking the batches in order.
func (b *bencher) sendAll(ctx context.Context, n int, tenantOf func(int) string) (sendResult, error) {
	var res sendResult
	cfg, err := b.poolConfig("sender", int32(b.o.Senders+2))
	if err != nil {
		return res, err
	}
	pool, err := connectPool(ctx, cfg)
	if err != nil {
		return res, err
	}
	defer pool.Close()
	s, err := pgstore.New(pool, &pgstore.Config{Schema: b.schema})
	if err != nil {
		return res, err
	}
	sender, err := durable.New(s, durable.Config{WorkerID: "bench-" + b.tag + "-sender", Logger: b.logger})
	if err != nil {
		return res, err
	}

	batches := splitBatches(n, b.o.SendBatch)
	b.logf("sending %d events in %d calls of up to %d from %d goroutines", n, len(batches), b.o.SendBatch, b.o.Senders)
	var next atomic.Int64
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for range min(b.o.Senders, len(batches)) {
		wg.Go(func() {
			for {
				k := int(next.Add(1)) - 1
				if k >= len(batches) || ctx.Err() != nil {
					return
				}
				lo, hi := batches[k][0], batches[k][1]
				evs := make([]durable.EventToSend, 0, hi-lo)
				for i := lo; i < hi; i++ {
					evs = append(evs, durable.EventToSend{Tenant: tenantOf(i), Key: workloads.WaitKey(i), Payload: i})
				}
				t := time.Now()
				got, err := sender.SendEvents(ctx, evs)
				d := Millis(time.Since(t))
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = fmt.Errorf("sending events %d-%d: %w", lo, hi-1, err)
					}
					mu.Unlock()
					return
				}
				res.calls++
				res.callMS = append(res.callMS, d)
				for _, c := range got {
					res.delivered += c
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.wall = time.Since(start)
	if firstErr != nil {
		return res, firstErr
	}
	return res, ctx.Err()
}

// splitBatches splits [0, n) into consecutive [lo, hi) ranges of size
// (the last may be shorter).
func splitBatches(n, size int) [][2]int {
	var out [][2]int
	for lo := 0; lo < n; lo += size {
		out = append(out, [2]int{lo, min(lo+size, n)})
	}
	return out
}

// memSample is the workers' memory and goroutines at one moment.
type memSample struct {
	label   string
	waiting int // runs waiting then
	// rss is the resident set (VmRSS): this process's with in-process
	// workers, else the sum of the worker processes'. rssAfterGC, heap and
	// goroutines are in-process only: the resident set after runtime.GC
	// and debug.FreeOSMemory, the live heap then, runtime.NumGoroutine.
	rss, rssAfterGC, heap int64
	goroutines            int
}

// sample samples the workers' memory (see memSample).
func (f *fleet) sample(label string, waiting int) (memSample, error) {
	s := memSample{label: label, waiting: waiting, rssAfterGC: -1, heap: -1, goroutines: -1}
	if len(f.procs) > 0 {
		for i, p := range f.procs {
			rss, err := readRSS(strconv.Itoa(p.cmd.Process.Pid))
			if err != nil {
				return s, fmt.Errorf("reading the RSS of worker process %s: %w", f.ids[i], err)
			}
			s.rss += rss
		}
		return s, nil
	}
	var err error
	if s.rss, err = readRSS("self"); err != nil {
		return s, err
	}
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s.heap = int64(ms.HeapAlloc)
	s.goroutines = runtime.NumGoroutine()
	if s.rssAfterGC, err = readRSS("self"); err != nil {
		return s, err
	}
	return s, nil
}

// addSamples adds the memory samples to the report: a table of them all,
// and metrics for each (rss_<i>_mib, heap_<i>_mib, goroutines_<i>, where
// i is before, start and end for the first three).
func addSamples(rep *Report, samples []memSample) {
	t := Table{Title: "WORKERS' MEMORY AND GOROUTINES", Columns: []string{"when", "runs waiting", "RSS MiB"}}
	inProcess := len(samples) > 0 && samples[0].goroutines >= 0
	if inProcess {
		t.Columns = append(t.Columns, "RSS after GC MiB", "heap MiB", "goroutines")
	}
	keys := []string{"before", "start", "end"}
	for i, s := range samples {
		row := []any{s.label, s.waiting, mib(s.rss)}
		if inProcess {
			row = append(row, mib(s.rssAfterGC), mib(s.heap), s.goroutines)
		}
		t.Rows = append(t.Rows, row)
		if i >= len(keys) {
			continue
		}
		k := keys[i]
		rep.Add("rss_"+k+"_mib", "RSS, "+s.label, mib(s.rss), "MiB", 1)
		if inProcess {
			rep.Add("rss_after_gc_"+k+"_mib", "  after GC, "+s.label, mib(s.rssAfterGC), "MiB", 1)
			rep.Add("heap_"+k+"_mib", "  live heap, "+s.label, mib(s.heap), "MiB", 1)
			rep.Add("goroutines_"+k, "goroutines, "+s.label, float64(s.goroutines), "goroutines", 0)
		}
	}
	rep.Tables = append(rep.Tables, t)
}

// mib converts bytes to MiB with one decimal.
func mib(n int64) float64 { return float64(int64(float64(n)/(1<<20)*10+0.5)) / 10 }

// readRSS returns the VmRSS of process pid ("self" for this one), in
// bytes, from /proc (Linux only).
func readRSS(pid string) (int64, error) {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0, err
	}
	return parseVmRSS(b)
}

// parseVmRSS returns the VmRSS line of a /proc/<pid>/status file, in
// bytes.
func parseVmRSS(status []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmRSS:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return 0, fmt.Errorf("unexpected VmRSS line %q", sc.Text())
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("unexpected VmRSS line %q", sc.Text())
		}
		return kb << 10, nil
	}
	return 0, errors.New("no VmRSS line in the process status")
}
