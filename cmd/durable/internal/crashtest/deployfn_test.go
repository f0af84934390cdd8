package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/cmd/durable/internal/crashtest/deploy"
)

// TestRollingDeployFunction deploys a new build of a durable function over
// three worker processes while runs of it are in flight: the new build
// changes the function's code with durable.Patched (it adds a step, audit,
// after the first sleep; see deploy.NewFunc) and keeps its FuncVersion, so
// that the new workers take the old runs over. The three new workers start
// beside the old ones, which are then stopped (SIGTERM: they drain and exit
// 0), while clients start runs all along, of the old build before the new
// workers start and of the new one after.
//
// No run fails, every run completes. The new build's runs take the new
// path; the old runs sleeping in nap-1 at the deploy reach the marker on a
// new worker and take the new path too; the old runs whose history went
// past the marker (sleeping in nap-2) take the old path on the new workers.
// Each run's output, the path it took, agrees with its records: the marker
// and audit's record on the new path, neither on the old one.
//
// The overlap, when old and new workers serve the runs together, is
// shorter than the sleeps: an old worker that resumed a run the new build
// patched would meet audit's record where its code calls b, and fail the
// run (a *NondeterminismError).
func TestRollingDeployFunction(t *testing.T) {
	d := functionDeploy(t, false)
	var patchedOld, oldOnNew int
	for _, r := range d.runs {
		switch {
		case r.build == "new":
			require.Equal(t, deploy.NewPath, r.path, "run %s of the new build", r.id)
		case r.path == deploy.NewPath:
			patchedOld++
		case r.cBy == "new":
			oldOnNew++
		}
	}
	require.Positive(t, patchedOld, "some old runs reached the marker on a new worker and took the new path")
	require.Positive(t, oldOnNew, "some old runs whose history went past the marker took the old path on a new worker")
	t.Logf("%d runs (%d of the old build): %d old runs took the new path, %d old runs took the old path to their end on a new worker; %d steps run",
		len(d.runs), d.old, patchedOld, oldOnNew, d.executions)
}

// TestRollingDeployFunctionVersion deploys a new build of the function
// with a new FuncVersion: the old runs are served by the old workers only,
// until they drain. The new workers start beside the old ones, clients
// start runs of the new build from then on, and the old workers are
// stopped once no run of the old version is left in flight. Every run
// completes, each step run by a build of its run's version; the old runs
// take the old path, the new ones the new path.
func TestRollingDeployFunctionVersion(t *testing.T) {
	d := functionDeploy(t, true)
	for _, r := range d.runs {
		want := map[string]string{"old": deploy.OldPath, "new": deploy.NewPath}[r.build]
		require.Equal(t, want, r.path, "run %s of the %s build", r.id, r.build)
	}
	t.Logf("%d runs (%d of the old build), %d steps run, each on a build of its run's version", len(d.runs), d.old, d.executions)
}

// fnDeployRun is a run of the function deploy proofs.
type fnDeployRun struct {
	id             uuid.UUID
	build, version string // the build that started it, its version
	path           string // its output
	cBy            string // the build that ran its step c
}

type fnDeployOutcome struct {
	runs       []fnDeployRun
	old        int
	executions int
}

// functionDeploy runs the deploy of deploy-fn, with a new version
// (versioned) or the same one, and checks that every run completed, with
// the records of the path it took, each step run by the build of its run's
// version (versioned) or by either build (the same version: the new build
// runs audit only).
func functionDeploy(t *testing.T, versioned bool) *fnDeployOutcome {
	h := newHarness(t)
	ctx := context.Background()
	steps := h.table("deploy_steps")
	_, err := h.pool.Exec(ctx, `CREATE TABLE `+steps+` (run_id uuid NOT NULL, workflow text NOT NULL, step text NOT NULL,
  build text NOT NULL, version text NOT NULL, attempt int NOT NULL)`)
	require.NoError(t, err)

	const nap = 2 * time.Second
	versions := map[string]string{"old": "1", "new": "1"}
	if versioned {
		versions["new"] = "2"
	}
	env := func(build string) []string {
		return []string{"DEPLOY_BUILD=" + build, "DEPLOY_NAP=" + nap.String(), "DEPLOY_FN_VERSION=" + versions[build]}
	}
	flags := []string{"--dead-after", "3s", "--heartbeat-interval", "500ms", "--drain-timeout", "10s", "--concurrency", "20"}
	oldFn, newFn := deploy.NewFunc("old", nap, versions["old"], nil), deploy.NewFunc("new", nap, versions["new"], nil)
	var old []*worker
	for i := range 3 {
		old = append(old, h.startProgram(deployApp, env("old"), fmt.Sprintf("old-%d", i+1), flags...))
	}

	// Clients start a run every 60ms: of the old build until the new
	// workers are up, of the new build after.
	var mu sync.Mutex
	started := map[uuid.UUID]string{}
	build := "old"
	stop := make(chan struct{})
	var trig sync.WaitGroup
	trig.Go(func() {
		tick := time.NewTicker(60 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			mu.Lock()
			b := build
			mu.Unlock()
			fn := oldFn
			if b == "new" {
				fn = newFn
			}
			id, err := fn.RunNoWait(ctx, h.client, fmt.Sprintf("tenant-%d", n%3), deploy.Input{N: n})
			if err != nil {
				t.Errorf("start a run (%s build): %v", b, err)
				return
			}
			mu.Lock()
			started[id] = b
			mu.Unlock()
		}
	})

	// The deploy; this timing is the scenario: after 3s (two sleeps of
	// 2s), old runs are in nap-1 and in nap-2.
	time.Sleep(3 * time.Second)
	var fleet []*worker
	for i := range 3 {
		fleet = append(fleet, h.startProgram(deployApp, env("new"), fmt.Sprintf("new-%d", i+1), flags...))
	}
	mu.Lock()
	build = "new"
	mu.Unlock()
	if versioned {
		// The old runs drain on the old workers.
		deadline := time.Now().Add(60 * time.Second)
		for {
			var open int
			require.NoError(t, h.pool.QueryRow(ctx, `SELECT count(*) FROM `+h.table("runs")+` WHERE version = $1 AND finished_at IS NULL`,
				versions["old"]).Scan(&open))
			if open == 0 {
				break
			}
			require.True(t, time.Now().Before(deadline), "%d old runs still in flight after 60s", open)
			time.Sleep(200 * time.Millisecond) // polling a condition
		}
	}
	var wg sync.WaitGroup
	for _, w := range old {
		wg.Go(func() {
			if code := w.terminate(30 * time.Second); code != 0 {
				t.Errorf("%s exited %d after SIGTERM, want 0", w.id, code)
			}
		})
	}
	wg.Wait()
	time.Sleep(2 * time.Second)
	close(stop)
	trig.Wait()
	h.waitSettled(1, 60*time.Second)

	// Every run completed, with the records of its path.
	d := &fnDeployOutcome{}
	rows, err := h.pool.Query(ctx, `SELECT id, version FROM `+h.table("runs")+` ORDER BY created_at, id`)
	require.NoError(t, err)
	type runVersion struct {
		id      uuid.UUID
		version string
	}
	rvs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (runVersion, error) {
		var rv runVersion
		err := row.Scan(&rv.id, &rv.version)
		return rv, err
	})
	require.NoError(t, err)
	require.Len(t, rvs, len(started))
	byID := map[uuid.UUID]int{}
	for _, rv := range rvs {
		r := fnDeployRun{id: rv.id, build: started[rv.id], version: rv.version}
		require.NotEmpty(t, r.build, "run %s was started by the test", r.id)
		require.Equal(t, versions[r.build], r.version, "run %s of the %s build", r.id, r.build)
		if r.build == "old" {
			d.old++
		}
		res, err := h.client.Get(ctx, r.id)
		require.NoError(t, err)
		require.Equal(t, "COMPLETED", string(res.Status), "run %s (%s build): %v", r.id, r.build, res.Err)
		var out string
		require.NoError(t, json.Unmarshal(res.Steps[0].Output, &out))
		r.path = out
		var recs []string
		for _, s := range res.Steps[1:] {
			recs = append(recs, s.Name)
			require.Equal(t, "COMPLETED", string(s.State), "run %s: %s", r.id, s.Name)
		}
		want := map[string][]string{
			deploy.OldPath: {"a#0", "nap-1#1", "b#2", "nap-2#3", "c#4"},
			deploy.NewPath: {"a#0", "nap-1#1", deploy.Patch + "#2", "audit#3", "b#4", "nap-2#5", "c#6"},
		}[out]
		require.NotNil(t, want, "run %s: output %q", r.id, out)
		require.Equal(t, want, recs, "run %s took the path %s", r.id, out)
		byID[r.id] = len(d.runs)
		d.runs = append(d.runs, r)
	}
	require.Greater(t, d.old, 20, "old runs were started")
	require.Greater(t, len(d.runs)-d.old, 20, "new runs were started")

	// Who ran each step: a build of the run's version (versioned); with
	// one version, audit only on the new build, and each step once.
	rows, err = h.pool.Query(ctx, `SELECT run_id, step, build, version FROM `+steps+` WHERE workflow = $1`, deploy.Func)
	require.NoError(t, err)
	type stepRun struct {
		run                  uuid.UUID
		step, build, version string
	}
	srs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (stepRun, error) {
		var x stepRun
		err := row.Scan(&x.run, &x.step, &x.build, &x.version)
		return x, err
	})
	require.NoError(t, err)
	d.executions = len(srs)
	ran := map[string]int{}
	for _, x := range srs {
		i, ok := byID[x.run]
		require.True(t, ok, "a step of run %s, which the test did not start", x.run)
		r := &d.runs[i]
		ran[x.run.String()+"/"+x.step]++
		require.Equal(t, versions[x.build], x.version)
		switch {
		case versioned:
			require.Equal(t, r.build, x.build, "run %s (%s build): step %s ran on the %s build", r.id, r.build, x.step, x.build)
		case x.step == "audit":
			require.Equal(t, "new", x.build, "run %s: audit ran on the old build", r.id)
		}
		if x.step == "c" {
			r.cBy = x.build
		}
	}
	for _, r := range d.runs {
		for _, s := range strings.Split(r.path, ",") {
			require.Equal(t, 1, ran[r.id.String()+"/"+s], "run %s: step %s ran %d times (no worker died)", r.id, s, ran[r.id.String()+"/"+s])
		}
	}
	return d
}
