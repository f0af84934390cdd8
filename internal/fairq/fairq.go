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
// A claim advances the frontier of every workflow its claimer serves to the
// highest block it claimed, since it has just taken every claimable task of
// those workflows below it. A workflow no claimer has served yet is at the
// highest frontier of any workflow. See docs/fair-queuing.md for why, and for
// what this means for claimers that serve different sets of workflows.
//
// Both stores place tasks with Lane.Place and compute frontiers with
// FrontierOf: the in-memory store through Queues, PostgreSQL on rows it
// loads and locks.
package fairq

import "slices"

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
// lanes and workflow frontiers. It is the in-memory twin of the PostgreSQL
// store's tenants, lanes and frontier tables. The zero value is ready to use.
type Queues struct {
	groups    map[string]int64
	next      int64
	lanes     map[laneKey]*Lane
	frontiers map[string]int64
	top       int64
}

type laneKey struct{ workflow, tenant string }

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

// Claimed records a claim of a claimer serving workflows whose highest
// claimed id is maxID: the frontier of each of those workflows advances to
// that id's block.
func (q *Queues) Claimed(workflows []string, maxID int64) {
	b := Block(maxID)
	if q.frontiers == nil {
		q.frontiers = make(map[string]int64)
	}
	for _, w := range workflows {
		if f, ok := q.frontiers[w]; !ok || f < b {
			q.frontiers[w] = b
		}
	}
	q.top = max(q.top, b)
}

// Frontier returns the frontier of workflow's queue.
func (q *Queues) Frontier(workflow string) int64 {
	f, ok := q.frontiers[workflow]
	return FrontierOf(f, ok, q.top)
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
