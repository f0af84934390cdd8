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
	// The goal's 20 minutes: the judged span is the last 10, from minute
	// 11 to minute 20.
	early, last := soakWindows(20 * time.Minute)
	require.Equal(t, 600.0, early.From)
	require.Equal(t, 660.0, early.To)
	require.Equal(t, 1140.0, last.From)
	require.Equal(t, 1200.0, last.To)
	require.True(t, early.covers(SoakSample{T: 610, Seconds: 10}))
	require.True(t, early.covers(SoakSample{T: 660, Seconds: 10}))
	require.False(t, early.covers(SoakSample{T: 600, Seconds: 10}), "the interval before the span")
	require.False(t, early.covers(SoakSample{T: 665, Seconds: 10}), "straddles the end")
	require.True(t, early.holds(SoakSample{T: 600, Seconds: 10}), "taken when the span opens")
	require.False(t, early.holds(SoakSample{T: 670, Seconds: 10}))

	early, last = soakWindows(10 * time.Minute)
	require.Equal(t, 300.0, early.From)
	require.Equal(t, 360.0, early.To)
	require.Equal(t, 540.0, last.From)

	// Tiny runs (the tests'): windows of a fifth of the run.
	early, last = soakWindows(10 * time.Second)
	require.Equal(t, 5.0, early.From)
	require.Equal(t, 7.0, early.To)
	require.Equal(t, 8.0, last.From)
	require.Equal(t, 10.0, last.To)
	for i := 1; i <= 10; i++ {
		s := SoakSample{T: float64(i), Seconds: 1, Completed: 100 * i, StatsMs: float64(i), ListMs: 0.1}
		early.add(s, []float64{float64(i)})
		last.add(s, nil)
	}
	require.Equal(t, 2.0, early.seconds)
	require.Equal(t, 650.0, early.perSecond(), "600 and 700 runs in 6 and 7s")
	require.Equal(t, []float64{6, 7}, early.lat)
	require.Equal(t, []float64{6, 7}, early.stats)
	require.Equal(t, []float64{0.1, 0.1}, early.list)
	require.Equal(t, 950.0, last.perSecond(), "900 and 1,000 runs in 9 and 10s")
	require.Equal(t, 0.0, (&soakWindow{}).perSecond())
}

func snap(t float64, sizes map[string]int64, dead int64) SoakSample {
	s := SoakSample{T: t, Seconds: 10}
	for _, n := range []string{"runs", "tasks", "ready"} {
		s.Tables = append(s.Tables, TableSnapshot{Name: n, Bytes: sizes[n], Dead: dead})
	}
	return s
}

func byName(ps []plateau) map[string]plateau {
	m := map[string]plateau{}
	for _, p := range ps {
		m[p.name] = p
	}
	return m
}

func TestPlateaus(t *testing.T) {
	t.Parallel()
	const m = 1 << 20
	// 100 s sampled every 10 s: the early window is 50-70s.
	early, _ := soakWindows(100 * time.Second)
	var samples []SoakSample
	for i := 1; i <= 10; i++ {
		// runs grows until t=40s then stays; tasks keeps growing by 10 MB
		// every sample; ready wobbles by a few hundred KB.
		samples = append(samples, snap(float64(10*i), map[string]int64{
			"runs": int64(min(i, 4)) * 100 * m, "tasks": int64(i) * 10 * m, "ready": int64(100+i*20) * 1024,
		}, int64(i)))
	}
	ref, ps := plateaus(samples, early)
	require.Equal(t, refSpan{50, 70}, ref)
	require.Equal(t, "t=50-70s", ref.String())
	require.Len(t, ps, 4)
	got := byName(ps)
	require.Equal(t, allTables, ps[0].name)
	require.True(t, got["runs"].flat())
	require.Equal(t, 0.0, got["runs"].growthPct())
	require.False(t, got["tasks"].flat(), "growing steadily: its peaks grow too")
	require.Equal(t, int64(70*m), got["tasks"].atRef)
	require.InDelta(t, 300.0/7, got["tasks"].growthPct(), 1e-9)
	require.Greater(t, got["ready"].growthPct(), 5.0)
	require.True(t, got["ready"].flat(), "under a megabyte of growth is no growth")
	all := got[allTables]
	require.Equal(t, int64(4*100*m+70*m+240*1024), all.atRef)
	require.Equal(t, int64(4*100*m+100*m+300*1024), all.maxLate)
	require.Equal(t, all.maxLate, all.atEnd)
	require.Equal(t, int64(21), all.deadRef, "three tables, 7 dead each at t=70s")
	require.Equal(t, int64(30), all.deadMax, "three tables, 10 dead each")
	require.False(t, all.flat())

	require.True(t, plateau{name: "x"}.flat())
	require.True(t, math.IsInf(plateau{name: "x", maxLate: 1}.growthPct(), 1))
	ref, ps = plateaus(nil, early)
	require.Zero(t, ref)
	require.Empty(t, ps)
}

// TestPlateausSawtooth: partitions dropped a period at a time make the
// sizes a sawtooth; peak against peak, it is flat, whichever sample the
// early window starts on, and a sawtooth whose peaks rise is not.
func TestPlateausSawtooth(t *testing.T) {
	t.Parallel()
	const m = 1 << 20
	early, _ := soakWindows(100 * time.Second)
	saw := func(shift int, rise int64) []SoakSample {
		var ss []SoakSample
		for i := 1; i <= 10; i++ {
			size := int64(100 * m)
			if (i+shift)%2 == 0 {
				size = 150*m + int64(i)*rise
			}
			ss = append(ss, snap(float64(10*i), map[string]int64{"runs": size, "tasks": size, "ready": 1 << 20}, 0))
		}
		return ss
	}
	for shift := range 2 {
		ss := saw(shift, 0)
		_, ps := plateaus(ss, early)
		for _, p := range ps {
			require.True(t, p.flat(), "shift %d: %s", shift, p.name)
			require.Equal(t, 0.0, p.growthPct(), "shift %d: %s", shift, p.name)
		}
		// A trough of the window against the peaks after it, as the
		// verdict read the sawtooth before: 50% growth of runs.
		trough := min(ss[4].Tables[0].Bytes, ss[5].Tables[0].Bytes)
		require.InDelta(t, 50.0, pctChange(float64(trough), float64(byName(ps)["runs"].maxLate)), 1e-9)
	}
	_, ps := plateaus(saw(0, 5*m), early)
	got := byName(ps)
	require.False(t, got["runs"].flat(), "peaks rising by 5 MB every sample")
	require.InDelta(t, 100*(200.0-180.0)/180.0, got["runs"].growthPct(), 1e-9)
	require.False(t, got[allTables].flat())
}

// TestPlateausSparse: samples further apart than the early window is
// wide; the reference is the last sample before the window ends.
func TestPlateausSparse(t *testing.T) {
	t.Parallel()
	early, _ := soakWindows(100 * time.Second) // 50-70s
	ss := []SoakSample{
		snap(45, map[string]int64{"runs": 100}, 0),
		snap(90, map[string]int64{"runs": 110}, 0),
		snap(100, map[string]int64{"runs": 104}, 0),
	}
	ref, ps := plateaus(ss, early)
	require.Equal(t, refSpan{45, 45}, ref)
	require.Equal(t, "t=45s", ref.String())
	require.InDelta(t, 10.0, byName(ps)["runs"].growthPct(), 1e-9)
	require.Equal(t, int64(104), byName(ps)["runs"].atEnd)

	ref, ps = plateaus(ss[1:], early)
	require.Equal(t, refSpan{90, 90}, ref, "nothing before the window ends: the first sample")
	require.InDelta(t, 100*(104-110)/110.0, byName(ps)["runs"].growthPct(), 1e-9)

	_, ps = plateaus(ss[:1], early)
	require.Empty(t, ps, "no sample after the reference")
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
	early, last := soakWindows(b.o.Duration) // 50-70s and 80-100s
	var samples []SoakSample
	for i := 1; i <= 10; i++ {
		// The total a sawtooth of 3 and 4.5 MB.
		size := int64(1 << 20)
		if i%2 == 0 {
			size = 5 << 19
		}
		s := snap(float64(10*i), map[string]int64{"runs": size, "tasks": 2 << 20}, 5)
		s.Triggered, s.Completed, s.P50, s.P99, s.Kept, s.Settled = 1000, 1000, 4, 20, 3000, 3000
		// Stats slows from 20 to 30 ms; the list from 0.3 to 0.6 ms.
		s.StatsMs, s.ListMs = 20, 0.3
		if i > 7 {
			s.StatsMs, s.ListMs = 30, 0.6
		}
		samples = append(samples, s)
		lat := make([]float64, 100)
		for j := range lat {
			lat[j] = float64(i)
		}
		early.add(s, lat)
		last.add(s, lat)
	}
	rep := &Report{Scenario: Soak, Verified: true}
	b.soakReport(rep, samples, early, last, 10_000, 10_000)
	rep.Series = samples
	m, ok := rep.Metric("last_runs_per_s")
	require.True(t, ok)
	require.Equal(t, 100.0, m.Value)
	require.True(t, *m.Met)
	m, _ = rep.Metric("early_runs_per_s")
	require.Equal(t, 100.0, m.Value)
	m, _ = rep.Metric("throughput_change_pct")
	require.Equal(t, 0.0, m.Value)
	require.True(t, *m.Met)
	m, _ = rep.Metric("early_p99_ms")
	require.Equal(t, 7.0, m.Value, "samples 6 and 7 (50-70s)")
	m, _ = rep.Metric("p99_change_pct")
	require.InDelta(t, 300.0/7, m.Value, 1e-9, "p99 7 in 50-70s, 10 in 80-100s")
	require.False(t, *m.Met)
	m, _ = rep.Metric("stats_change_pct")
	require.InDelta(t, 50.0, m.Value, 1e-9)
	require.False(t, *m.Met, "10 ms slower")
	m, _ = rep.Metric("list_change_pct")
	require.InDelta(t, 100.0, m.Value, 1e-9)
	require.True(t, *m.Met, "0.3 ms slower: within 1 ms")
	m, _ = rep.Metric("last_list_ms")
	require.Equal(t, 0.6, m.Value)
	m, _ = rep.Metric("size_growth_pct")
	require.Equal(t, 0.0, m.Value, "the sawtooth's peaks are level")
	require.True(t, *m.Met)
	m, _ = rep.Metric("size_ref_mb")
	require.Equal(t, 4.5, m.Value)

	var buf bytes.Buffer
	require.NoError(t, rep.WriteText(&buf))
	out := buf.String()
	for _, want := range []string{"throughput, early window (50-70s)", "throughput, last window (80-100s)", "SERIES", "TABLE SIZES (MB, with indexes)", "DEAD TUPLES",
		"PLATEAU: each table (with indexes), its largest size after t=70s against its largest at t=50-70s", "all tables",
		"all tables' size: largest after t=70s vs largest at t=50-70s", "≤ 5.0 or within 1 ms", "Stats (window 24h), median, early window (50-70s)"} {
		require.Contains(t, out, want)
	}
	require.Contains(t, strings.Join(rep.Notes, "\n"), "sub-millisecond timings are noise-bound")
	buf.Reset()
	require.NoError(t, rep.WriteJSON(&buf))
	var got map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &got))
	series := got["series"].([]any)
	require.Len(t, series, 10)
	first := series[0].(map[string]any)
	require.Equal(t, 10.0, first["t_s"])
	require.Equal(t, 20.0, first["stats_ms"])
	require.Equal(t, 0.3, first["list_ms"])
	require.Equal(t, "runs", first["tables"].([]any)[0].(map[string]any)["name"])
	require.NotContains(t, buf.String(), "deleted")
	m, _ = rep.Metric("runs_uncounted")
	require.Equal(t, 0.0, m.Value)
	require.True(t, *m.Met)
	require.NotContains(t, strings.Join(rep.Notes, "\n"), "did not count")

	// Windows shorter than a sample: no comparison, said so.
	b.o.Sample, b.o.Duration = time.Minute, 2*time.Minute
	early, last = soakWindows(b.o.Duration)
	rep = &Report{Scenario: Soak}
	b.soakReport(rep, samples[:2], early, last, 0, 1)
	_, ok = rep.Metric("p99_change_pct")
	require.False(t, ok)
	_, ok = rep.Metric("size_growth_pct")
	require.False(t, ok)
	require.Contains(t, strings.Join(rep.Notes, "\n"), "no comparison")
	require.Contains(t, strings.Join(rep.Notes, "\n"), "no verdict on the sizes")
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
	early, last := soakWindows(b.o.Duration)
	rep := &Report{Scenario: Soak, Verified: true}
	b.soakReport(rep, ss, early, last, 1000, 1000)
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
