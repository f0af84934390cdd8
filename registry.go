package durable

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// registry holds the workflows registered on an engine: by name, every
// version registered, in the order registered. Guarded by Engine.mu; the
// slices it hands out are never changed afterwards (a registration builds
// new ones).
type registry struct {
	byName map[string][]*registered
	// names are the workflows' names, sorted.
	names []string
	// queues are what the engine claims (store.ClaimTasksParams.Queues):
	// dag.Queue of every registered version and of its legacy version
	// (registered.legacy), and of version "" for each name (runs recorded
	// before versions, which any version serves), sorted.
	queues []string
	// versions are the versions registered, as queue names, sorted: what
	// the engine's worker record lists (a worker that lists versions
	// serves the runs recorded before versions too: see
	// WorkerInfo.ServesVersion). accepts are the versions whose runs the
	// engine moves, and the legacy versions it serves, likewise.
	versions, accepts []string
}

// registered is one version of a workflow registered on an engine.
type registered struct {
	d     *workflowDef
	shape *durabletype.Shape
	// childOnly is set for a workflow registered only because another
	// starts it as a child run: registering it again is not a duplicate.
	childOnly bool
	// legacy is the version releases before fingerprint 2 gave this
	// definition (workflowDef.legacyVersion), "" if none: the engine
	// serves the runs pinned to it as runs of this version, so that runs
	// an older release started go on after an upgrade of the library. The
	// worker's record lists it among the versions it accepts.
	legacy string
}

// newest returns the version of name that new runs started by name get:
// the one registered last on its own account (or, if every version was
// registered only as a child workflow, the last of those).
func (r *registry) newest(name string) *registered {
	vs := r.byName[name]
	for i := len(vs) - 1; i >= 0; i-- {
		if !vs[i].childOnly {
			return vs[i]
		}
	}
	if len(vs) > 0 {
		return vs[len(vs)-1]
	}
	return nil
}

// version returns version v of workflow name, or for v "" (a run recorded
// before versions) the newest.
func (r *registry) version(name, v string) *registered {
	if v == "" {
		return r.newest(name)
	}
	for _, x := range r.byName[name] {
		if x.shape.Version == v {
			return x
		}
	}
	return nil
}

// serving returns the registered version that runs the runs of workflow
// name pinned to version v: version v, else the one whose legacy version
// v is.
func (r *registry) serving(name, v string) *registered {
	if x := r.version(name, v); x != nil {
		return x
	}
	for _, x := range r.byName[name] {
		if x.legacy == v {
			return x
		}
	}
	return nil
}

// record is what the engine's worker record says it serves and accepts.
func (r *registry) record() served {
	return served{workflows: r.versions, accepts: r.accepts}
}

// served is what a worker record lists.
type served struct{ workflows, accepts []string }

// acceptance is one version whose runs a registered definition accepts.
type acceptance struct {
	workflow, from string
	to             *registered
}

// acceptances lists every version accepted by a registered definition.
func (r *registry) acceptances() []acceptance {
	var out []acceptance
	for _, name := range r.names {
		for _, x := range r.byName[name] {
			for _, v := range x.d.accepts {
				out = append(out, acceptance{workflow: name, from: v, to: x})
			}
		}
	}
	return out
}

// Register validates workflow definitions and makes this engine execute
// their runs, and those of the child workflows they start (Child) that no
// workflow of the same name and version stands for already. Several
// versions of one workflow may be registered side by side (see
// Workflow.Version): each serves the runs pinned to it, and the one
// registered last is the one StartByName and schedules start. It reports
// every definition error it finds (as *DefinitionError values joined
// together) and registers nothing if there is any: registering a version
// already registered fails with ErrDuplicateWorkflow, and a definition
// whose Accepts cannot hold with ErrIncompatible (checked against the
// accepted version as registered here or as recorded by the store's runs;
// the store is read for it, within 10 seconds). Registering may happen
// before or after Start, not after Stop (ErrEngineStopped).
func (e *Engine) Register(defs ...Definition) error {
	var errs []error
	queue := make([]*workflowDef, 0, len(defs))
	for _, def := range defs {
		var d *workflowDef
		if def != nil {
			d = def.definition()
		}
		if d == nil {
			errs = append(errs, &DefinitionError{Err: ErrNilFunc, Detail: "nil workflow"})
			continue
		}
		queue = append(queue, d)
	}
	recorded, err := e.recordedShapes(queue)
	if err != nil {
		return err
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return ErrEngineStopped
	}
	type key struct{ name, version string }
	seen := map[key]bool{}
	broken := map[*workflowDef]bool{} // reported once, however often referenced
	var add []*registered
	own := map[*registered]bool{} // child-only entries registered now on their own account
	// The workflows given, then the child workflows they start (and
	// theirs), unless that version of the workflow is registered or given.
	given := len(queue)
	for k := 0; k < len(queue); k++ {
		d := queue[k]
		shape, err := e.shapeOf(d)
		if err != nil {
			if !broken[d] {
				errs = append(errs, err)
			}
			broken[d] = true
			continue
		}
		kv := key{d.name, shape.Version}
		existing := e.reg.version(d.name, shape.Version)
		if k >= given && (seen[kv] || existing != nil) {
			continue
		}
		switch {
		case k < given && existing != nil && existing.d == d && existing.childOnly:
			own[existing] = true // registered as a child workflow before
			seen[kv] = true
			continue
		case existing != nil || seen[kv]:
			errs = append(errs, &DefinitionError{Workflow: d.name, Err: ErrDuplicateWorkflow,
				Detail: "version " + dag.Quote(shape.Version) + " is registered already"})
			continue
		}
		seen[kv] = true
		add = append(add, &registered{d: d, shape: shape, childOnly: k >= given, legacy: d.legacyVersion()})
		for _, s := range d.steps {
			queue = append(queue, s.children()...)
		}
	}
	errs = append(errs, e.reg.checkAccepts(add, recorded)...)
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	next := registry{byName: make(map[string][]*registered, len(e.reg.byName)+len(add))}
	for name, vs := range e.reg.byName {
		next.byName[name] = slices.Clone(vs)
	}
	for x := range own {
		vs := next.byName[x.d.name]
		i := slices.Index(vs, x)
		cp := *x
		cp.childOnly = false
		// Now on its own account, it is the newest.
		next.byName[x.d.name] = append(slices.Delete(vs, i, i+1), &cp)
	}
	for _, x := range add {
		next.byName[x.d.name] = append(next.byName[x.d.name], x)
	}
	next.index()
	if err := e.checkDeclared(&next); err != nil {
		return err
	}
	e.reg = next
	if e.rt != nil {
		e.rt.registrar.Refresh() // the record lists the new workflows
		signal(e.rt.upgradeSig)  // and what they accept
		var late []*workflowDef
		for _, d := range next.declaring() {
			if slices.ContainsFunc(add, func(x *registered) bool { return x.d == d }) {
				late = append(late, d)
			}
		}
		if len(late) > 0 {
			e.declareLate(e.rt, late)
		}
	}
	return nil
}

// index computes names, queues and accepts from byName.
func (r *registry) index() {
	for name, vs := range r.byName {
		r.names = append(r.names, name)
		r.queues = append(r.queues, dag.Queue(name, ""))
		for _, x := range vs {
			r.queues = append(r.queues, dag.Queue(name, x.shape.Version))
			r.versions = append(r.versions, dag.Queue(name, x.shape.Version))
			if x.legacy != "" {
				// Claimed as its own, listed as accepted (the runs of
				// the legacy version are taken on, not run as another).
				r.queues = append(r.queues, dag.Queue(name, x.legacy))
				r.accepts = append(r.accepts, dag.Queue(name, x.legacy))
			}
			for _, v := range x.d.accepts {
				r.accepts = append(r.accepts, dag.Queue(name, v))
			}
		}
	}
	slices.Sort(r.names)
	slices.Sort(r.queues)
	r.queues = slices.Compact(r.queues)
	slices.Sort(r.versions)
	slices.Sort(r.accepts)
	r.accepts = slices.Compact(r.accepts)
}

// checkAccepts checks the Accepts of the definitions to add against the
// versions they accept: as registered (already, or with them), else as
// recorded by the store. Two definitions of a workflow may not accept the
// same version.
func (r *registry) checkAccepts(add []*registered, recorded map[string][]store.VersionRecord) []error {
	var errs []error
	all := slices.Clone(add)
	for _, vs := range r.byName {
		all = append(all, vs...)
	}
	for _, x := range add {
		for _, v := range x.d.accepts {
			bad := func(err error, detail string) {
				errs = append(errs, &DefinitionError{Workflow: x.d.name, Err: err, Detail: detail})
			}
			for _, y := range all {
				if y != x && y.d.name == x.d.name && slices.Contains(y.d.accepts, v) {
					bad(ErrInvalidOption, fmt.Sprintf("versions %s and %s both accept version %s",
						dag.Quote(x.shape.Version), dag.Quote(y.shape.Version), dag.Quote(v)))
				}
			}
			var from []*durabletype.Shape
			for _, y := range all {
				if y.d.name == x.d.name && y.shape.Version == v {
					from = append(from, y.shape)
				}
			}
			for _, rec := range recorded[x.d.name] {
				if rec.Version == v && rec.Shape != nil {
					from = append(from, rec.Shape)
				}
			}
			for _, sh := range from {
				if err := dag.CheckAccepts(sh, x.shape); err != nil {
					bad(durabletype.ErrIncompatible, fmt.Sprintf("Accepts(%s): %v", dag.Quote(v), trimIncompatible(err)))
					break
				}
			}
		}
	}
	return errs
}

// trimIncompatible returns err's text without ErrIncompatible's, which the
// DefinitionError that carries it says already.
func trimIncompatible(err error) string {
	var ue *dag.UpgradeError
	if errors.As(err, &ue) {
		if ue.Step != "" {
			return fmt.Sprintf("step %s: %s", dag.Quote(ue.Step), ue.Reason)
		}
		return ue.Reason
	}
	return err.Error()
}

// acceptsCheckTimeout bounds the store read with which Register checks
// Accepts declarations.
const acceptsCheckTimeout = 10 * time.Second

// recordedShapes reads, for the workflows among defs that accept other
// versions, the versions the store recorded; nil when none does or the
// store keeps no versions.
func (e *Engine) recordedShapes(defs []*workflowDef) (map[string][]store.VersionRecord, error) {
	v, ok := e.store.(store.Versioner)
	if !ok {
		return nil, nil
	}
	var out map[string][]store.VersionRecord
	for _, d := range defs {
		d.mu.Lock()
		accepts := len(d.accepts) > 0
		d.mu.Unlock()
		if !accepts || out[d.name] != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), acceptsCheckTimeout)
		res, err := v.ListVersions(ctx, &store.ListVersionsParams{Workflow: d.name})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("durable: reading the recorded versions of workflow %s to check its Accepts: %w", dag.Quote(d.name), err)
		}
		if out == nil {
			out = map[string][]store.VersionRecord{}
		}
		out[d.name] = res.Versions
	}
	return out, nil
}

// workflow returns the newest registered version of the workflow name, or
// nil.
func (e *Engine) workflow(name string) *workflowDef {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x := e.reg.newest(name); x != nil {
		return x.d
	}
	return nil
}

// workflowVersion returns the definition that runs the runs of the
// workflow name pinned to version v (registry.serving; the newest for v
// ""), or nil.
func (e *Engine) workflowVersion(name, v string) *workflowDef {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x := e.reg.serving(name, v); x != nil {
		return x.d
	}
	return nil
}

// workflowNames returns the names of the registered workflows, sorted.
func (e *Engine) workflowNames() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.reg.names
}

// servedQueues returns the names and the queues the engine claims.
func (e *Engine) servedQueues() (names, queues []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.reg.names, e.reg.queues
}
