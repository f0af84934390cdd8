package fairq

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestIDArithmetic(t *testing.T) {
	t.Parallel()
	tests := []struct{ group, block int64 }{{0, 1}, {1, 1}, {BlockLength - 1, 1}, {7, 1 << 30}}
	for _, tt := range tests {
		id := ID(tt.group, tt.block)
		require.Equal(t, tt.block, Block(id))
		require.Equal(t, tt.group, Group(id))
	}
	require.Less(t, ID(BlockLength-1, 1), ID(0, 2), "every id of a block precedes the next block")
}

func TestNextBlock(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		last     int64
		hasLast  bool
		frontier int64
		want     int64
	}{
		{"new tenant joins the current round", 0, false, 40, 40},
		{"new tenant on an empty queue starts at the first block", 0, false, 0, FirstBlock},
		{"idle tenant catches up to the current round", 3, true, 40, 40},
		{"tenant just behind the frontier", 39, true, 40, 40},
		{"backlogged tenant continues after its own last block", 100, true, 40, 101},
		{"tenant at the frontier goes to the next block", 40, true, 40, 41},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, NextBlock(tt.last, tt.hasLast, tt.frontier))
		})
	}
}

func TestQueues(t *testing.T) {
	t.Parallel()
	var q Queues
	require.True(t, q.Ensure("A"))
	require.True(t, q.Ensure("A"), "ensuring twice is fine")
	require.True(t, q.Ensure("B"))
	_, ok := q.Place("wf", "C")
	require.False(t, ok, "a tenant without a group has no lane")
	a1, _ := q.Place("wf", "A")
	a2, _ := q.Place("wf", "A")
	b1, _ := q.Place("wf", "B")
	require.Equal(t, ID(0, 1), a1)
	require.Equal(t, ID(0, 2), a2)
	require.Equal(t, ID(1, 1), b1, "B's first task shares A's first block")
	require.Less(t, b1, a2, "so it is served before A's second")

	q.Claimed("c1", []string{"wf"}, ID(1, 50))
	require.EqualValues(t, 50, q.Frontier("wf"))
	q.Claimed("c2", []string{"wf"}, ID(0, 3))
	require.EqualValues(t, 50, q.Frontier("wf"), "the frontier never moves back")
	a3, _ := q.Place("wf", "A")
	require.Equal(t, ID(0, 50), a3, "A, idle since block 2, rejoins at the frontier")
	require.True(t, q.Ensure("C"))
	c1, _ := q.Place("wf", "C")
	require.Equal(t, ID(2, 50), c1, "a new tenant joins at the frontier")
}

func TestQueuesPerWorkflow(t *testing.T) {
	t.Parallel()
	var q Queues
	for _, tenant := range []string{"B", "F", "N"} {
		require.True(t, q.Ensure(tenant))
	}
	for range 100 {
		q.Place("slow", "B")
	}
	for range 1000 {
		q.Place("fast", "F")
	}
	q.Claimed("slow-claimer", []string{"slow"}, ID(0, 10))
	q.Claimed("fast-claimer", []string{"fast"}, ID(1, 1000))
	require.EqualValues(t, 10, q.Frontier("slow"), "claims of another workflow do not move slow's frontier")
	require.EqualValues(t, 1000, q.Frontier("fast"))
	n, _ := q.Place("slow", "N")
	require.Equal(t, ID(2, 10), n, "a new tenant of slow joins slow's round")
	f, _ := q.Place("slow", "F")
	require.Equal(t, ID(1, 10), f, "F's lane in slow is its own: its fast backlog does not push it back")
	require.EqualValues(t, 1000, q.Frontier("new"), "a workflow never claimed joins the highest round")

	q.Claimed("mixed", []string{"slow", "fast", "other"}, ID(0, 20))
	require.EqualValues(t, 20, q.Frontier("slow"), "a claim advances every workflow its claimer serves")
	require.EqualValues(t, 1000, q.Frontier("fast"))
	require.EqualValues(t, 20, q.Frontier("other"))

	q.Claimed("mixed", []string{"other"}, ID(0, 15))
	require.EqualValues(t, 20, q.Frontier("slow"), "a claimer's frontier never moves back")
	q.Claimed("mixed", []string{"other"}, ID(0, 30))
	require.EqualValues(t, 10, q.Frontier("slow"), "a claimer that stopped serving slow no longer counts for it")
	require.EqualValues(t, 30, q.Frontier("other"))
}

func TestFrontierOf(t *testing.T) {
	t.Parallel()
	require.Equal(t, FirstBlock, FrontierOf(0, false, 0))
	require.EqualValues(t, 7, FrontierOf(0, false, 7))
	require.EqualValues(t, 3, FrontierOf(3, true, 7))
}

func TestQueuesFull(t *testing.T) {
	t.Parallel()
	q := Queues{next: BlockLength}
	require.False(t, q.Ensure("late"))
	_, ok := q.Place("wf", "late")
	require.False(t, ok)
}

func TestQueuesPrune(t *testing.T) {
	t.Parallel()
	var q Queues
	q.Claimed("old", []string{"a", "b"}, ID(0, 5))
	q.Claimed("a-only", []string{"a"}, ID(0, 9))
	q.Claimed("b-only", []string{"b"}, ID(0, 7))
	q.Claimed("c-only", []string{"c"}, ID(0, 3))
	q.Claimed("tie-1", []string{"d"}, ID(0, 4))
	q.Claimed("tie-2", []string{"d"}, ID(0, 4))
	before := map[string]int64{}
	for _, w := range []string{"a", "b", "c", "d", "none"} {
		before[w] = q.Frontier(w)
	}
	q.Prune()
	for w, f := range before {
		require.Equal(t, f, q.Frontier(w), "pruning changes no frontier (%s)", w)
	}
	require.NotContains(t, q.claimers, "old", "a and b are both decided by claimers ahead of it")
	require.Contains(t, q.claimers, "c-only", "the only claimer of c stays")
	require.Contains(t, q.claimers, "a-only", "the highest claimer of all stays")
	require.Contains(t, q.claimers, "tie-2", "of two tied claimers the later name stays")
	require.NotContains(t, q.claimers, "tie-1")
}

func TestDisplace(t *testing.T) {
	q := func(id int64, p int) Queued { return Queued{ID: id, Priority: p} }
	for _, c := range []struct {
		name string
		lane []Queued
		n    int
		want map[int64]int64
	}{
		{"no priorities", []Queued{q(1, 0), q(2, 0), q(3, 0)}, 3, map[int64]int64{}},
		// 4 normal, then 1 high: the high takes the first slot, the
		// displaced one the high one's: h, n2, n3, n4, n1.
		{"one high, one slot", []Queued{q(1, 0), q(2, 0), q(3, 0), q(4, 0), q(5, 1)}, 1, map[int64]int64{5: 1, 1: 5}},
		{"one high, every slot", []Queued{q(1, 0), q(2, 0), q(3, 0), q(4, 0), q(5, 1)}, 5, map[int64]int64{5: 1, 1: 5}},
		// The highest first, then by slot; a displaced task moves again if
		// its new slot comes up while a higher one waits behind it.
		{"two levels", []Queued{q(1, 0), q(2, 0), q(3, 1), q(4, 2), q(5, 1)}, 5,
			map[int64]int64{4: 1, 3: 2, 5: 3, 1: 4, 2: 5}},
		{"order does not matter", []Queued{q(5, 1), q(4, 2), q(3, 1), q(2, 0), q(1, 0)}, 5,
			map[int64]int64{4: 1, 3: 2, 5: 3, 1: 4, 2: 5}},
		{"a slot at the head already best", []Queued{q(1, 2), q(2, 0), q(3, 1)}, 1, map[int64]int64{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, Displace(c.lane, c.n))
		})
	}
}
