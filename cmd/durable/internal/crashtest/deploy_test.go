package crashtest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/cmd/durable/internal/crashtest/deploy"
	"github.com/effectivelabs/durable/durabletype"
)

// TestRollingDeploy deploys a new build of a service over a fleet of three
// worker processes, one process at a time (SIGTERM, drain, start the new
// build), while clients of both builds start runs all along and runs sleep
// across the deploy. The new build adds a step to one workflow (and
// accepts that workflow's old runs), removes a step from another and
// changes a step's output type in a third (see package deploy).
//
// No run fails. Every step is run by a build of the version its run was
// at when the step was claimed. Every run settles, except the runs of the
// old versions of the two workflows the new build cannot accept that were
// still in flight when the last old worker left: those wait, listed
// unserved with their version.
func TestRollingDeploy(t *testing.T) {
	d := rollingDeploy(t, false)
	require.Zero(t, d.failed, "no run fails in a rolling deploy\n%s", d.failures)
	old := deploy.New("old", time.Second, false, nil)
	stuck := 0
	for _, r := range d.runs {
		switch {
		case r.settled:
			require.Equal(t, "COMPLETED", r.status, "run %s of %s", r.id, r.workflow)
		case r.build == "old" && r.workflow != deploy.Add:
			stuck++ // checked below: unserved
		default:
			require.Failf(t, "run not settled", "run %s of %s (%s build) at version %s", r.id, r.workflow, r.build, r.version)
		}
	}
	require.Positive(t, stuck, "some old runs of the workflows the new build cannot accept were in flight when the last old worker left")
	require.Positive(t, d.moved, "old runs of deploy-add moved to the new version")
	vs, err := d.h.client.Versions(context.Background(), "")
	require.NoError(t, err)
	unserved := map[string]bool{}
	for _, v := range vs {
		if v.Unserved() {
			unserved[v.Workflow+"@"+v.Version] = true
		}
	}
	for _, r := range d.runs {
		if !r.settled {
			require.True(t, unserved[r.workflow+"@"+r.version], "run %s of %s@%s is listed unserved (unserved: %v)", r.id, r.workflow, r.version, unserved)
		}
	}
	require.False(t, unserved[deploy.Add+"@"+old.Add.Version()], "the old version of deploy-add is accepted")
	t.Logf("%d runs, %d steps run; %d old runs of deploy-add moved to the new version; %d old runs wait, unserved (%v)",
		len(d.runs), d.executions, d.moved, stuck, unserved)
}

// TestRollingDeployWithoutVersions is the same deploy with both builds'
// workflows under one version, as every deploy was before versions: runs
// fail (a build meets a step it lacks, or an output of another type). It
// shows that the proof above would catch the failure it guards against.
func TestRollingDeployWithoutVersions(t *testing.T) {
	d := rollingDeploy(t, true)
	require.Positive(t, d.failed, "without versions a rolling deploy fails runs")
	t.Logf("%d of %d runs failed:\n%s", d.failed, len(d.runs), d.failures)
}

// deployRun is a run of the deploy proof.
type deployRun struct {
	id                       uuid.UUID
	workflow, build, version string // its workflow, the build that started it, its version now
	status                   string
	settled                  bool
}

// deployOutcome is what a deploy did.
type deployOutcome struct {
	h          *harness
	runs       []deployRun
	failed     int
	failures   string
	moved      int // runs that moved to another version
	executions int
}

// rollingDeploy runs the deploy and checks that each step ran on a build of
// its run's version (with versions: sameVersion false).
func rollingDeploy(t *testing.T, sameVersion bool) *deployOutcome {
	h := newHarness(t)
	ctx := context.Background()
	steps := h.table("deploy_steps")
	_, err := h.pool.Exec(ctx, `CREATE TABLE `+steps+` (run_id uuid NOT NULL, workflow text NOT NULL, step text NOT NULL,
  build text NOT NULL, version text NOT NULL, attempt int NOT NULL)`)
	require.NoError(t, err)

	const nap = 3 * time.Second
	env := func(build string) []string {
		e := []string{"DEPLOY_BUILD=" + build, "DEPLOY_NAP=" + nap.String()}
		if sameVersion {
			e = append(e, "DEPLOY_SAME_VERSION=1")
		}
		return e
	}
	flags := []string{"--dead-after", "3s", "--heartbeat-interval", "500ms", "--drain-timeout", "10s", "--concurrency", "20"}
	builds := map[string]*deploy.Build{"old": deploy.New("old", nap, sameVersion, nil), "new": deploy.New("new", nap, sameVersion, nil)}
	fleet := make([]*worker, 3)
	for i := range fleet {
		fleet[i] = h.startProgram(deployApp, env("old"), fmt.Sprintf("old-%d", i+1), flags...)
	}

	// Clients of both builds start runs all along: the old ones until the
	// second worker is replaced, the new ones from the first replacement on.
	var mu sync.Mutex
	started := map[uuid.UUID]string{} // run -> the build that started it
	active := map[string]bool{"old": true}
	stop := make(chan struct{})
	var trig sync.WaitGroup
	trig.Go(func() {
		tick := time.NewTicker(40 * time.Millisecond)
		defer tick.Stop()
		n := 0
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			mu.Lock()
			var on []string
			for b, ok := range active {
				if ok {
					on = append(on, b)
				}
			}
			mu.Unlock()
			for _, b := range on {
				for _, wf := range []*durable.Workflow[deploy.Input]{builds[b].Add, builds[b].Remove, builds[b].Types} {
					n++
					id, err := wf.RunNoWait(ctx, h.client, fmt.Sprintf("tenant-%d", n%3), deploy.Input{N: n})
					if err != nil {
						t.Errorf("start a run of %s (%s build): %v", wf.Name(), b, err)
						return
					}
					mu.Lock()
					started[id] = b
					mu.Unlock()
				}
			}
		}
	})
	setActive := func(build string, on bool) {
		mu.Lock()
		active[build] = on
		mu.Unlock()
	}

	// The deploy, one worker at a time; this timing is the scenario.
	time.Sleep(2 * time.Second)
	for i, w := range fleet {
		require.Equal(t, 0, w.terminate(30*time.Second), "%s drains and exits 0", w.id)
		fleet[i] = h.startProgram(deployApp, env("new"), fmt.Sprintf("new-%d", i+1), flags...)
		switch i {
		case 0:
			setActive("new", true)
		case 1:
			setActive("old", false)
		}
		time.Sleep(1500 * time.Millisecond)
	}
	time.Sleep(time.Second)
	close(stop)
	trig.Wait()

	// Wait for every run to settle, but those that wait for a version no
	// worker serves (their sleep over, their next step queued).
	d := &deployOutcome{h: h}
	deadline := time.Now().Add(90 * time.Second)
	for {
		open, err := openRuns(ctx, h)
		require.NoError(t, err)
		if open == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond) // polling a condition
	}

	// The runs, as they are now.
	rows, err := h.pool.Query(ctx, `SELECT id, workflow, version, status, finished_at IS NOT NULL FROM `+h.table("runs")+` ORDER BY created_at, id`)
	require.NoError(t, err)
	for rows.Next() {
		var r deployRun
		require.NoError(t, rows.Scan(&r.id, &r.workflow, &r.version, &r.status, &r.settled))
		r.build = started[r.id]
		require.NotEmpty(t, r.build, "run %s was started by the test", r.id)
		d.runs = append(d.runs, r)
		if r.status == "FAILED" {
			d.failed++
			if d.failed <= 5 {
				res, err := h.client.Get(ctx, r.id)
				require.NoError(t, err)
				d.failures += fmt.Sprintf("  %s %s (%s build): %v\n", r.id, r.workflow, r.build, res.Err)
			}
		}
	}
	require.NoError(t, rows.Err())
	require.Len(t, d.runs, len(started))
	require.Greater(t, len(d.runs), 100, "runs were started all along")
	if sameVersion {
		return d
	}

	// Each step ran on a build of the version its run was at when the step
	// was claimed: the version it started with, or, claimed after the run
	// moved (an UPGRADED event), the new one.
	versionOf := map[string]string{}
	for _, b := range builds {
		for _, wf := range []*durable.Workflow[deploy.Input]{b.Add, b.Remove, b.Types} {
			versionOf[b.Label+"/"+wf.Name()] = wf.Version()
		}
	}
	type exec struct {
		run                            uuid.UUID
		workflow, step, build, version string
		attempt                        int
	}
	rows, err = h.pool.Query(ctx, `SELECT run_id, workflow, step, build, version, attempt FROM `+steps)
	require.NoError(t, err)
	execs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (exec, error) {
		var x exec
		err := row.Scan(&x.run, &x.workflow, &x.step, &x.build, &x.version, &x.attempt)
		return x, err
	})
	require.NoError(t, err)
	d.executions = len(execs)
	moved := map[uuid.UUID]time.Time{}
	claimed := map[string]time.Time{} // run/step/attempt -> STARTED
	for _, r := range d.runs {
		evs, err := h.client.Events(ctx, r.id)
		require.NoError(t, err)
		for _, ev := range evs {
			switch ev.Type {
			case durabletype.EventUpgraded:
				if _, ok := moved[r.id]; !ok {
					moved[r.id] = ev.At
				}
			case durabletype.EventStarted:
				claimed[fmt.Sprintf("%s/%s/%d", r.id, ev.Step, ev.Attempt)] = ev.At
			}
		}
	}
	d.moved = len(moved)
	for _, x := range execs {
		build := started[x.run]
		if at, ok := moved[x.run]; ok && !claimed[fmt.Sprintf("%s/%s/%d", x.run, x.step, x.attempt)].Before(at) {
			build = "new"
		}
		require.Equal(t, build, x.build, "run %s (%s, started by the %s build): step %s attempt %d ran on the %s build",
			x.run, x.workflow, started[x.run], x.step, x.attempt, x.build)
		require.Equal(t, versionOf[build+"/"+x.workflow], x.version)
	}
	for id := range moved {
		require.Equal(t, "old", started[id], "only old runs move")
	}
	return d
}

// openRuns counts the runs that have not settled and still can: every run
// that has not settled, less those of a version no live worker serves
// whose next step is queued (they wait for such a worker).
func openRuns(ctx context.Context, h *harness) (int, error) {
	var open int
	if err := h.pool.QueryRow(ctx, `SELECT count(*) FROM `+h.table("runs")+` WHERE finished_at IS NULL`).Scan(&open); err != nil {
		return 0, err
	}
	vs, err := h.client.Versions(ctx, "")
	if err != nil {
		return 0, err
	}
	for _, v := range vs {
		if v.Unserved() && v.InFlight == v.Ready {
			open -= v.InFlight // each waits, its one next step queued
		}
	}
	return open, nil
}
