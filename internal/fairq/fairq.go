// Package fairq is the arithmetic of block-based fair queuing (Hatchet's
// scheme): the id space is cut into blocks of BlockLength ids; each tenant owns
// one slot (its group) in every block, and each task a tenant enqueues goes
// into the next block that tenant has not used. Claiming in id order then
// serves tenants round-robin, one task per tenant per block, with no work at
// read time.
//
// The frontier is the highest block claimed so far: the round being served. A
// tenant's next block is max(its last block + 1, frontier), so a new tenant,
// or one returning after being idle, joins the current round (it is neither
// starved behind blocks it never used nor allowed to jump ahead of tenants
// already waiting in it), while a backlogged tenant keeps its own FIFO order
// behind its earlier tasks.
//
// Why the highest block claimed rather than the lowest block still queued:
// the lowest queued block lags whenever some tenant is held back (at its
// concurrency cap, or behind locked rows), and a returning tenant placed there
// would get every block between it and the current round, jumping ahead of
// everyone. See docs/fair-queuing.md.
package fairq

// BlockLength is the number of ids in a block, and so the most tenants.
const BlockLength int64 = 1 << 20

// FirstBlock is the first block used, so that no id is 0 (ids double as
// claim tokens, where 0 means "no claim").
const FirstBlock int64 = 1

// ID is the queue id of a task of the tenant with the given group placed in
// the given block.
func ID(group, block int64) int64 { return block*BlockLength + group }

// Block is the block an id falls in.
func Block(id int64) int64 { return id / BlockLength }

// Group is the tenant group of an id.
func Group(id int64) int64 { return id % BlockLength }

// NextBlock is the block for a tenant's next task, given the last block it
// used (hasLast false for a tenant that never enqueued) and the frontier.
func NextBlock(last int64, hasLast bool, frontier int64) int64 {
	frontier = max(frontier, FirstBlock)
	if !hasLast || last+1 < frontier {
		return frontier
	}
	return last + 1
}

// Tenants assigns groups and blocks to tenants; it is the in-memory twin of
// the PostgreSQL store's tenant table. The zero value is ready to use.
type Tenants struct {
	groups   map[string]*tenant
	next     int64
	frontier int64
}

type tenant struct {
	group   int64
	last    int64
	hasLast bool
}

// Ensure gives a tenant a group if it has none. It reports false when the
// tenant is new and every group is taken.
func (ts *Tenants) Ensure(name string) bool {
	_, ok := ts.ensure(name)
	return ok
}

func (ts *Tenants) ensure(name string) (*tenant, bool) {
	if ts.groups == nil {
		ts.groups = make(map[string]*tenant)
	}
	if t, ok := ts.groups[name]; ok {
		return t, true
	}
	if ts.next >= BlockLength {
		return nil, false
	}
	t := &tenant{group: ts.next}
	ts.next++
	ts.groups[name] = t
	return t, true
}

// Next returns the id for the next task of a tenant, giving it a group if it
// has none; false when the tenant is new and every group is taken.
func (ts *Tenants) Next(name string) (int64, bool) {
	t, ok := ts.ensure(name)
	if !ok {
		return 0, false
	}
	t.last = NextBlock(t.last, t.hasLast, ts.frontier)
	t.hasLast = true
	return ID(t.group, t.last), true
}

// Claimed advances the frontier past a claimed id.
func (ts *Tenants) Claimed(id int64) {
	if b := Block(id); b > ts.frontier {
		ts.frontier = b
	}
}

// Frontier returns the current frontier.
func (ts *Tenants) Frontier() int64 { return max(ts.frontier, FirstBlock) }
