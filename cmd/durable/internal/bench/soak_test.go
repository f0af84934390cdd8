package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
)

func TestSoakWindows(t *testing.T) {
	t.Parallel()
	second, last := soakWindows(10 * time.Minute)
	require.Equal(t, 60.0, second.From)
	require.Equal(t, 120.0, second.To)
	require.Equal(t, 540.0, last.From)
	require.Equal(t, 600.0, last.To)
	require.True(t, second.covers(SoakSample{T: 70, Seconds: 10}))
	require.True(t, second.covers(SoakSample{T: 120, Seconds: 10}))
	require.False(t, second.covers(SoakSample{T: 60, Seconds: 10}))
	require.False(t, second.covers(SoakSample{T: 125, Seconds: 10}), "straddles the end")

	second, last = soakWindows(10 * time.Second)
	require.Equal(t, 2.0, second.From)
	require.Equal(t, 4.0, second.To)
	require.Equal(t, 8.0, last.From)
	second.seconds, second.runs = 2, 300
	require.Equal(t, 150.0, second.perSecond())
	require.Equal(t, 0.0, last.perSecond())
}

func snap(t float64, sizes map[string]int64, dead int64) SoakSample {
	s := SoakSample{T: t, Seconds: 10}
	for _, n := range []string{"runs", "tasks", "ready"} {
		s.Tables = append(s.Tables, TableSnapshot{Name: n, Bytes: sizes[n], Dead: dead})
	}
	return s
}

func TestPlateaus(t *testing.T) {
	t.Parallel()
	const m = 1 << 20
	var samples []SoakSample
	for i := 1; i <= 10; i++ {
		// runs grows until t=40s then stays; tasks keeps growing by 10 MB
		// every sample; ready wobbles by a few hundred KB.
		samples = append(samples, snap(float64(10*i), map[string]int64{
			"runs": int64(min(i, 4)) * 100 * m, "tasks": int64(i) * 10 * m, "ready": int64(100+i*20) * 1024,
		}, int64(i)))
	}
	ref, ps := plateaus(samples, 100*time.Second)
	require.Equal(t, 40.0, ref)
	require.Len(t, ps, 4)
	byName := map[string]plateau{}
	for _, p := range ps {
		byName[p.name] = p
	}
	require.Equal(t, allTables, ps[0].name)
	require.True(t, byName["runs"].flat())
	require.Equal(t, 0.0, byName["runs"].growthPct())
	require.False(t, byName["tasks"].flat())
	require.InDelta(t, 150.0, byName["tasks"].growthPct(), 1e-9)
	require.Greater(t, byName["ready"].growthPct(), 10.0)
	require.True(t, byName["ready"].flat(), "under a megabyte of growth is no growth")
	all := byName[allTables]
	require.Equal(t, int64(4*100*m+40*m+180*1024), all.atRef)
	require.Equal(t, int64(30), all.deadMax, "three tables, 10 dead each")
	require.InDelta(t, 100*float64(60*m+120*1024)/float64(all.atRef), all.growthPct(), 1e-9)
	require.False(t, all.flat())

	require.True(t, plateau{name: "x"}.flat())
	require.True(t, math.IsInf(plateau{name: "x", maxLate: 1}.growthPct(), 1))
	ref, ps = plateaus(nil, time.Minute)
	require.Zero(t, ref)
	require.Empty(t, ps)
}

func TestSortTables(t *testing.T) {
	t.Parallel()
	ts := []TableSnapshot{{Name: "tenants"}, {Name: "ready"}, {Name: "frontier"}, {Name: "runs"}, {Name: "tasks"}}
	sortTables(ts)
	var names []string
	for _, x := range ts {
		names = append(names, x.Name)
	}
	require.Equal(t, []string{"runs", "tasks", "ready", "frontier", "tenants"}, names)
}

func TestSoakReport(t *testing.T) {
	t.Parallel()
	b := &bencher{o: Options{Duration: 100 * time.Second, Rate: 100, Sample: 10 * time.Second}}
	second, last := soakWindows(b.o.Duration)
	var samples []SoakSample
	for i := 1; i <= 10; i++ {
		s := snap(float64(10*i), map[string]int64{"runs": 1 << 20, "tasks": 2 << 20}, 5)
		s.Triggered, s.Completed, s.P50, s.P99, s.Kept, s.Settled = 1000, 1000, 4, 20, 3000, 3000
		samples = append(samples, s)
		for _, w := range []*soakWindow{second, last} {
			if w.covers(s) {
				w.seconds += s.Seconds
				w.runs += s.Completed
				for range 100 {
					w.lat = append(w.lat, float64(i))
				}
			}
		}
	}
	rep := &Report{Scenario: Soak, Verified: true}
	b.soakReport(rep, samples, second, last, 10_000, 10_000)
	rep.Series = samples
	m, ok := rep.Metric("last_runs_per_s")
	require.True(t, ok)
	require.Equal(t, 100.0, m.Value)
	require.True(t, *m.Met)
	m, _ = rep.Metric("p99_change_pct")
	require.InDelta(t, 150.0, m.Value, 1e-9, "p99 4 in 20-40s (the 2nd window: samples 3 and 4), 10 in 80-100s")
	require.False(t, *m.Met)
	m, _ = rep.Metric("size_growth_pct")
	require.Equal(t, 0.0, m.Value)

	var buf bytes.Buffer
	require.NoError(t, rep.WriteText(&buf))
	out := buf.String()
	for _, want := range []string{"throughput, 2nd window (20-40s)", "SERIES", "TABLE SIZES (MB, with indexes)", "DEAD TUPLES",
		"PLATEAU: each table (with indexes) from t=40s on", "all tables"} {
		require.Contains(t, out, want)
	}
	buf.Reset()
	require.NoError(t, rep.WriteJSON(&buf))
	var got map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &got))
	series := got["series"].([]any)
	require.Len(t, series, 10)
	first := series[0].(map[string]any)
	require.Equal(t, 10.0, first["t_s"])
	require.Equal(t, "runs", first["tables"].([]any)[0].(map[string]any)["name"])
	require.NotContains(t, buf.String(), "deleted")
	m, _ = rep.Metric("runs_uncounted")
	require.Equal(t, 0.0, m.Value)
	require.True(t, *m.Met)
	require.NotContains(t, strings.Join(rep.Notes, "\n"), "did not count")

	// Windows shorter than a sample: no comparison, said so.
	b.o.Sample, b.o.Duration = time.Minute, 2*time.Minute
	second, last = soakWindows(b.o.Duration)
	rep = &Report{Scenario: Soak}
	b.soakReport(rep, samples[:2], second, last, 0, 1)
	_, ok = rep.Metric("p99_change_pct")
	require.False(t, ok)
	require.Contains(t, strings.Join(rep.Notes, "\n"), "no comparison")
	require.Contains(t, strings.Join(rep.Notes, "\n"), "the trigger loop fell behind")
}

// TestAccountSoak: the runs settled before the end are those pruned and
// those kept with a finished_at before it; those no interval counted are
// uncounted, whatever the intervals said.
func TestAccountSoak(t *testing.T) {
	t.Parallel()
	mk := func(completed ...int) []SoakSample {
		var ss []SoakSample
		for i, c := range completed {
			ss = append(ss, SoakSample{T: float64(i + 1), Seconds: 1, Completed: c})
		}
		return ss
	}
	// 1000 sent; at the final sample 300 kept: 250 settled before the
	// end, 30 after it, 20 in flight. So 700 pruned, 950 settled by the
	// end, all of which the intervals counted (100 + 8 × 95 + 90).
	ss := mk(100, 95, 95, 95, 95, 95, 95, 95, 95, 90)
	end := &ss[len(ss)-1]
	end.Kept, end.Settled, end.InFlight = 300, 250, 20
	require.Equal(t, soakAccount{settled: 950, uncounted: 0, after: 30, inFlight: 20}, accountSoak(ss, 1000))

	// The sampler fell behind: the middle intervals read nothing, their
	// runs pruned first; the same final sample says how many it missed.
	ss = mk(100, 95, 0, 0, 0, 0, 0, 0, 95, 90)
	end = &ss[len(ss)-1]
	end.Kept, end.Settled, end.InFlight = 300, 250, 20
	a := accountSoak(ss, 1000)
	require.Equal(t, soakAccount{settled: 950, uncounted: 570, after: 30, inFlight: 20}, a)

	b := &bencher{o: Options{Duration: 10 * time.Second, Rate: 100, Sample: time.Second, Retention: 3 * time.Second}}
	second, last := soakWindows(b.o.Duration)
	rep := &Report{Scenario: Soak, Verified: true}
	b.soakReport(rep, ss, second, last, 1000, 1000)
	m, _ := rep.Metric("runs_uncounted")
	require.Equal(t, 570.0, m.Value)
	require.False(t, *m.Met)
	m, _ = rep.Metric("runs_completed")
	require.Equal(t, 950.0, m.Value)
	m, _ = rep.Metric("completed_per_s")
	require.Equal(t, 95.0, m.Value)
	require.Contains(t, strings.Join(rep.Notes, "\n"), "570 runs completed in an interval that its sample did not count")

	require.Equal(t, soakAccount{}, accountSoak(nil, 0))
}

func TestListMix(t *testing.T) {
	t.Parallel()
	m := newListMix(1_000_000)
	require.Equal(t, listMix{total: 1_000_000, failed: 10_000, running: 300}, m)
	require.Equal(t, 989_700, m.completed())
	m = newListMix(2000)
	require.Equal(t, 20, m.failed)
	require.Equal(t, 20, m.running)
	require.Equal(t, 1, newListMix(50).failed)
	// Batches take their shares exactly.
	for _, batch := range []int{1, 7, 250, 5000} {
		var f, r int
		for lo := 0; lo < 2000; lo += batch {
			hi := min(lo+batch, 2000)
			f += share(20, 2000, lo, hi)
			r += share(20, 2000, lo, hi)
		}
		require.Equal(t, 20, f, "batch %d", batch)
		require.Equal(t, 20, r, "batch %d", batch)
	}
}

func TestCheckPage(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	run := func(sec int, id byte, status durabletype.RunStatus) durabletype.RunSummary {
		r := durabletype.RunSummary{CreatedAt: at.Add(time.Duration(sec) * time.Second), Status: status}
		r.ID[15] = id
		return r
	}
	all := func(durabletype.RunSummary) bool { return true }
	page := []durabletype.RunSummary{run(3, 1, durabletype.RunFailed), run(2, 9, durabletype.RunFailed), run(2, 8, durabletype.RunFailed)}
	require.Empty(t, checkPage(page, 3, all))
	require.Contains(t, checkPage(page, 4, all), "3 runs, want 4")
	require.Contains(t, checkPage(page, 3, func(r durabletype.RunSummary) bool { return r.Status == durabletype.RunRunning }), "does not match")
	page[2].ID[15] = 9
	require.Contains(t, checkPage(page, 3, all), "comes after a newer run")
	require.Empty(t, checkPage(nil, 0, all))
}

func TestMB(t *testing.T) {
	t.Parallel()
	require.Equal(t, 1.5, mb(3<<19))
	require.Equal(t, 0.0, mb(1000))
	require.Equal(t, 1.23, round2(1.2345))
}
