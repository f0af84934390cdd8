package memstore

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

var _ store.Versioner = (*Store)(nil)

// recordVersion records the shape c of workflow, unless the same shape
// (equal JSON) is recorded already, as pgstore's shapes table does.
func (s *Store) recordVersion(workflow string, c *dag.Compiled, at time.Time) {
	js, err := json.Marshal(c.Shape)
	if err != nil {
		return // a shape that compiled is plain data
	}
	for _, v := range s.versions {
		if v.Workflow == workflow && v.Version == c.Shape.Version {
			if old, _ := json.Marshal(v.Shape); string(old) == string(js) {
				return
			}
		}
	}
	var cp durabletype.Shape
	_ = json.Unmarshal(js, &cp)
	s.versions = append(s.versions, store.VersionRecord{Workflow: workflow, Version: c.Shape.Version, Shape: &cp, RecordedAt: at})
}

// ListVersions implements store.Versioner.
func (s *Store) ListVersions(ctx context.Context, p *store.ListVersionsParams) (*store.ListVersionsResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	res := &store.ListVersionsResult{}
	for _, v := range s.versions {
		if p.Workflow == "" || v.Workflow == p.Workflow {
			js, _ := json.Marshal(v.Shape)
			var cp durabletype.Shape
			_ = json.Unmarshal(js, &cp)
			v.Shape = &cp
			res.Versions = append(res.Versions, v)
		}
	}
	slices.SortStableFunc(res.Versions, func(a, b store.VersionRecord) int {
		return cmp.Or(cmp.Compare(a.Workflow, b.Workflow), b.RecordedAt.Compare(a.RecordedAt))
	})
	return res, nil
}
