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

func TestTenants(t *testing.T) {
	t.Parallel()
	var ts Tenants
	require.True(t, ts.Ensure("A"))
	require.True(t, ts.Ensure("A"), "ensuring twice is fine")
	a1, _ := ts.Next("A")
	a2, _ := ts.Next("A")
	b1, _ := ts.Next("B")
	require.Equal(t, ID(0, 1), a1)
	require.Equal(t, ID(0, 2), a2)
	require.Equal(t, ID(1, 1), b1, "B's first task shares A's first block")
	require.Less(t, b1, a2, "so it is served before A's second")

	ts.Claimed(ID(1, 50))
	require.EqualValues(t, 50, ts.Frontier())
	ts.Claimed(ID(0, 3))
	require.EqualValues(t, 50, ts.Frontier(), "the frontier never moves back")
	a3, _ := ts.Next("A")
	require.Equal(t, ID(0, 50), a3, "A, idle since block 2, rejoins at the frontier")
	c1, _ := ts.Next("C")
	require.Equal(t, ID(2, 50), c1, "a new tenant joins at the frontier")
}

func TestTenantsFull(t *testing.T) {
	t.Parallel()
	ts := Tenants{next: BlockLength}
	ts.groups = map[string]*tenant{}
	require.False(t, ts.Ensure("late"))
	_, ok := ts.Next("late")
	require.False(t, ok)
}
