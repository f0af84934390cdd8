package dag

import (
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/store"
)

// Matches reports whether a run passes a filter: the rule of ListRuns,
// which memstore applies as is and pgstore as SQL (the conformance suite
// holds them to the same results).
func Matches(f *store.RunFilter, r *store.Run) bool {
	switch {
	case f.Tenant != "" && r.Tenant != f.Tenant,
		f.Workflow != "" && r.Workflow != f.Workflow,
		f.Version != "" && r.Version != f.Version,
		len(f.Statuses) > 0 && !slices.Contains(f.Statuses, r.Status),
		!f.CreatedAfter.IsZero() && r.CreatedAt.Before(f.CreatedAfter),
		!f.CreatedBefore.IsZero() && !r.CreatedAt.Before(f.CreatedBefore),
		f.Parent != uuid.Nil && (r.Parent == nil || r.Parent.RunID != f.Parent),
		f.TopLevel && r.Parent != nil,
		f.IdempotencyKey != "" && r.IdempotencyKey != f.IdempotencyKey:
		return false
	}
	if len(f.InputContains) > 0 && !ContainsJSON(r.Input, f.InputContains) {
		return false
	}
	if !f.FinishedAfter.IsZero() || !f.FinishedBefore.IsZero() {
		switch {
		case !r.Settled(),
			!f.FinishedAfter.IsZero() && r.FinishedAt.Before(f.FinishedAfter),
			!f.FinishedBefore.IsZero() && !r.FinishedAt.Before(f.FinishedBefore):
			return false
		}
	}
	return true
}

// ValidTime reports whether t can bound a listing in every store: its
// year is 1 to 9999 (PostgreSQL records no time before 4713 BC, Go's zero
// time is year 1, and no run is created after 9999). Filters and cursors
// with other times are refused rather than answered differently by each
// store.
func ValidTime(t time.Time) bool {
	y := t.UTC().Year()
	return y >= 1 && y <= 9999
}

// Newer reports whether run a comes before run b in the newest-first order
// of ListRuns: later creation first, then the greater ID.
func Newer(a, b store.RunKey) bool {
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.After(b.CreatedAt)
	}
	return string(a.ID[:]) > string(b.ID[:])
}
