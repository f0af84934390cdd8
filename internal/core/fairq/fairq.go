// Package fairq is the arithmetic of block-based fair queuing (Hatchet's
// scheme): the id space is cut into blocks of BlockLength ids; each tenant owns
// one slot (its group) in every block, and each task a tenant enqueues goes
// into the next block that tenant has not used. Claiming in id order then
// serves tenants round-robin, one task per tenant per block, with no work at
// read time.
//
// Fair order is kept per workflow: each workflow's tasks form a queue of their
// own, with its own rounds. A lane is one tenant's place in one workflow's
// queue (the last block it used); a workflow's frontier is the round its
// claimers are serving. A lane's next block is max(its last block + 1,
// frontier): a new tenant, or one returning after being idle, joins the
// current round of that workflow, while a backlogged tenant keeps its own
// FIFO order behind its earlier tasks.
//
// Each claimer keeps its frontier: the highest block it claimed, with the
// workflows it serves. A claim moves it up, since the claimer has just taken
// every claimable task of those workflows below it; the frontier of a
// workflow is the highest of the claimers serving it, and a workflow no
// claimer has served yet is at the highest frontier of all. See
// docs/fair-queuing.md for why, and for what this means for claimers that
// serve different sets of workflows.
//
// Both stores place tasks with Lane.Place, advance claimers with
// Claimer.Advance and compute frontiers with Frontiers (FrontierOf): the
// in-memory store through Queues, PostgreSQL in its claim statement and on
// rows it reads.
package fairq

import (
	"cmp"
	"slices"
)

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

// NextBlock is the block for a lane's next task, given the last block it
// used (hasLast false for a lane that never enqueued) and its workflow's
// frontier.
func NextBlock(last int64, hasLast bool, frontier int64) int64 {
	frontier = max(frontier, FirstBlock)
	if !hasLast || last+1 < frontier {
		return frontier
	}
	return last + 1
}

// FrontierOf is the frontier of a workflow: own, the highest block claimed
// by a claimer serving it, when there is one (hasOwn); otherwise top, the
// highest frontier of any workflow, so that the first tasks of a workflow
// join the current round rather than jump ahead of it. Never below
// FirstBlock.
func FrontierOf(own int64, hasOwn bool, top int64) int64 {
	if !hasOwn {
		own = top
	}
	return max(own, FirstBlock)
}

// Lane is the fair-queue state of one tenant in one workflow's queue.
type Lane struct {
	// Group is the tenant's group: its slot in every block.
	Group int64
	// Last is the last block the lane placed a task in; meaningful only
	// when HasLast.
	Last    int64
	HasLast bool
}

// Place returns the id of the lane's next task, given its workflow's
// frontier, and records the block it used.
func (l *Lane) Place(frontier int64) int64 {
	l.Last = NextBlock(l.Last, l.HasLast, frontier)
	l.HasLast = true
	return ID(l.Group, l.Last)
}

// Queues is the fair-queue state of a store in memory: tenant groups,
// lanes and claimers' frontiers. It is the in-memory twin of the PostgreSQL
// store's tenants, lanes and frontier tables. The zero value is ready to use.
type Queues struct {
	groups   map[string]int64
	next     int64
	lanes    map[laneKey]*Lane
	claimers map[string]*Claimer
}

type laneKey struct{ workflow, tenant string }

// Claimer is one claimer's frontier: the highest block it claimed, and the
// workflows it served then.
type Claimer struct {
	Block     int64
	Workflows []string
}

// Advance records a claim whose highest id is maxID by a claimer serving
// workflows: the claimer's block moves up to that id's block, and its
// workflows are recorded with it. A claim below the claimer's block
// changes nothing.
func (c *Claimer) Advance(workflows []string, maxID int64) bool {
	b := Block(maxID)
	if b <= c.Block {
		return false
	}
	c.Block, c.Workflows = b, slices.Clone(workflows)
	return true
}

// Frontiers returns the frontier of workflow given every claimer's: the
// highest block of a claimer serving it (FrontierOf), or the highest of all
// when none does.
func Frontiers(claimers []Claimer, workflow string) int64 {
	var own, top int64
	hasOwn := false
	for _, c := range claimers {
		top = max(top, c.Block)
		if slices.Contains(c.Workflows, workflow) && (!hasOwn || c.Block > own) {
			own, hasOwn = c.Block, true
		}
	}
	return FrontierOf(own, hasOwn, top)
}

// Ensure gives a tenant a group if it has none. It reports false when the
// tenant is new and every group is taken.
func (q *Queues) Ensure(tenant string) bool {
	if q.groups == nil {
		q.groups = make(map[string]int64)
	}
	if _, ok := q.groups[tenant]; ok {
		return true
	}
	if q.next >= BlockLength {
		return false
	}
	q.groups[tenant] = q.next
	q.next++
	return true
}

// Place returns the id of the next task of tenant in workflow's queue. The
// tenant must have a group (Ensure); false otherwise.
func (q *Queues) Place(workflow, tenant string) (int64, bool) {
	g, ok := q.groups[tenant]
	if !ok {
		return 0, false
	}
	if q.lanes == nil {
		q.lanes = make(map[laneKey]*Lane)
	}
	k := laneKey{workflow, tenant}
	l := q.lanes[k]
	if l == nil {
		l = &Lane{Group: g}
		q.lanes[k] = l
	}
	return l.Place(q.Frontier(workflow)), true
}

// Claimed records a claim by claimer, serving workflows, whose highest
// claimed id is maxID (Claimer.Advance).
func (q *Queues) Claimed(claimer string, workflows []string, maxID int64) {
	if q.claimers == nil {
		q.claimers = make(map[string]*Claimer)
	}
	c := q.claimers[claimer]
	if c == nil {
		c = &Claimer{}
		q.claimers[claimer] = c
	}
	c.Advance(workflows, maxID)
}

// Prune forgets the claimers whose frontiers decide no workflow's (see
// Obsolete), as the PostgreSQL store's leader deletes their rows.
func (q *Queues) Prune() {
	for name := range q.claimers {
		if q.obsolete(name) {
			delete(q.claimers, name)
		}
	}
}

// obsolete reports whether claimer name's frontier decides no workflow's:
// for each workflow it served another claimer serving it is ahead (by
// block, then name, so that of two tied the later name stays), and it is
// not the highest of all.
func (q *Queues) obsolete(name string) bool {
	c := q.claimers[name]
	ahead := func(other string, o *Claimer) bool {
		return o.Block > c.Block || (o.Block == c.Block && other > name)
	}
	highest := true
	for other, o := range q.claimers {
		if ahead(other, o) {
			highest = false
		}
	}
	if highest {
		return false
	}
	for _, w := range c.Workflows {
		covered := false
		for other, o := range q.claimers {
			if ahead(other, o) && slices.Contains(o.Workflows, w) {
				covered = true
				break
			}
		}
		if !covered {
			return false
		}
	}
	return true
}

// Frontier returns the frontier of workflow's queue.
func (q *Queues) Frontier(workflow string) int64 {
	cs := make([]Claimer, 0, len(q.claimers))
	for _, c := range q.claimers {
		cs = append(cs, *c)
	}
	return Frontiers(cs, workflow)
}

// Tenants returns the tenants with groups, in group order.
func (q *Queues) Tenants() []string {
	out := make([]string, 0, len(q.groups))
	for t := range q.groups {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b string) int { return int(q.groups[a] - q.groups[b]) })
	return out
}

// Outranks reports whether a ready task of priority p1 and id id1 is
// claimed before one of priority p2 and id id2 of the same lane: the higher
// priority first, then the lower id. A claim that takes a lane's slot (its
// lowest id) runs the lane's task that outranks all others, which then
// takes the id of the task it displaced from the slot, so that priorities
// order a tenant's tasks without changing how many slots it has.
func Outranks(p1 int, id1 int64, p2 int, id2 int64) bool {
	if p1 != p2 {
		return p1 > p2
	}
	return id1 < id2
}

// Queued is a ready task of a lane, as Displace sees it: the slot it holds
// (its id) and its priority.
type Queued struct {
	ID       int64
	Priority int
}

// Displace decides who holds the first n slots of a lane (its n lowest
// ids), and returns the moves, old id to new id, of the tasks that change
// slots. It is the one rule of priorities in the fair queue, which both
// stores follow (memstore as it claims, one slot at a time; pgstore as it
// reorders the head of the queue before a claim, and after a claim that
// took a task without that reorder):
//
// Slots are taken in id order. The slot's task runs in it unless a task
// of a higher priority queued later in the lane outranks it; then the one
// that outranks all others (Outranks) takes the slot, and the task it
// displaces takes the slot that one held, later in the queue. A lane
// keeps its slots, so the shares between tenants are what they are
// without priorities; among tasks of one priority, order is first come,
// first served, except that a task displaced by a higher one moves to that
// one's later slot.
//
// lane must hold the lane's n lowest ids and its n tasks that outrank all
// others (more is fine); its order does not matter.
func Displace(lane []Queued, n int) map[int64]int64 {
	at := slices.Clone(lane) // at[i] is the task holding the i-th slot
	slices.SortFunc(at, func(a, b Queued) int { return cmp.Compare(a.ID, b.ID) })
	slots := make([]int64, len(at))
	for i, q := range at {
		slots[i] = q.ID
	}
	for i := 0; i < n && i < len(at); i++ {
		best := -1
		for j := i + 1; j < len(at); j++ {
			if at[j].Priority > at[i].Priority &&
				(best < 0 || Outranks(at[j].Priority, slots[j], at[best].Priority, slots[best])) {
				best = j
			}
		}
		if best >= 0 {
			at[i], at[best] = at[best], at[i]
		}
	}
	moves := map[int64]int64{}
	for i, q := range at {
		if q.ID != slots[i] {
			moves[q.ID] = slots[i]
		}
	}
	return moves
}
