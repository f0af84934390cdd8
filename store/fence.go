package store

import "context"

// termKey is the context key of a leader's term (WithTerm).
type termKey struct{}

// WithTerm returns a copy of ctx that carries a leader's term: the
// fencing token an Elector hands out with each leadership (the context it
// passes to lead carries it). A store's leader-only writes (FireTimers,
// RescueTasks, ApplyInbox, Scheduler.FireSchedules, PruneRuns,
// PruneEvents, WorkerRegistry.PruneWorkers) made with a context that
// carries a term commit only while that term is the store's current
// leadership, and fail with durabletype.ErrNotLeader, writing nothing,
// once it is not: a leader that froze, lost its lease and woke after
// another took over applies nothing. A context without a term is not
// fenced (a caller that is not a leader: tests, a one-off Prune).
func WithTerm(ctx context.Context, term int64) context.Context {
	return context.WithValue(ctx, termKey{}, term)
}

// TermOf returns the leader's term ctx carries (WithTerm), and whether it
// carries one.
func TermOf(ctx context.Context) (int64, bool) {
	t, ok := ctx.Value(termKey{}).(int64)
	return t, ok
}
