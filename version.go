package durable

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
	"github.com/effectivelabs/durable/store"
)

// Versions of a workflow (docs/semantics.md, "Versions and deploys").
//
// Every registered workflow has a version: by default a fingerprint of its
// definition (Workflow.Version says which), or the one set by WithVersion.
// A run records the version it started with and stays pinned to it: only
// an engine that registered the workflow at that version claims its steps,
// so that a deploy that changes a workflow never fails a run in flight.
// An engine may register several versions of one workflow side by side,
// and a newer definition may declare that it accepts the runs of older
// versions (Accepts): its engines move those runs to it.

// Errors of versions.
var (
	// ErrInvalidVersion: a version given to WithVersion, Accepts or an
	// upgrade is not 1-64 letters, digits or _-.+ starting with a letter
	// or digit.
	ErrInvalidVersion = dag.ErrInvalidVersion
	// ErrIncompatible: a definition cannot accept the runs of a version, or
	// a run cannot move to a version, because a step it has not finished
	// is missing or different there; the error names the step.
	ErrIncompatible = durabletype.ErrIncompatible
	// ErrVersionMismatch: an upgrade found a run at another version than
	// the one it moves runs from.
	ErrVersionMismatch = durabletype.ErrVersionMismatch
	// ErrUnknownVersion: an upgrade names a version that no engine
	// registered here and no run recorded.
	ErrUnknownVersion = errors.New("durable: unknown version")
)

// WithVersion sets the workflow's version to v instead of its
// fingerprint, for teams that version workflows by hand: runs started with
// it are served only by engines that registered this workflow at version
// v. Change v when a deploy changes the workflow in a way runs in flight
// cannot follow; keep it when it does not. v is 1-64 letters, digits or
// _-.+ starting with a letter or a digit. It returns w. Call it while
// declaring the workflow, before it is registered.
func (w *Workflow[I]) WithVersion(v string) *Workflow[I] {
	d := w.defn()
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.frozen:
		d.errs = append(d.errs, &DefinitionError{Workflow: d.name, Err: ErrWorkflowFrozen, Detail: "WithVersion"})
	case !dag.ValidVersion(v):
		d.errs = append(d.errs, &DefinitionError{Workflow: d.name, Err: ErrInvalidVersion,
			Detail: dag.Quote(v) + ": use 1-64 letters, digits or _-.+ starting with a letter or digit"})
	case d.version != "":
		d.errs = append(d.errs, &DefinitionError{Workflow: d.name, Err: ErrInvalidOption, Detail: "WithVersion set twice"})
	default:
		d.version = v
	}
	return w
}

// Accepts declares that this definition can run the runs of the given
// older versions of the workflow: version ids as `durable workflows` and
// `durable workers` show them, or as an older definition's Version
// returns them (AcceptsRunsOf takes the older definition itself). The
// engines that register it move those runs to its version (each in one
// atomic unit, as Engine.UpgradeRuns does) and then run them. A run
// moves with what it has done: its finished steps keep their outputs,
// steps this version adds are created and run when their parents are
// done.
//
// Registering refuses the declaration when it cannot hold for every run of
// such a version, whatever it has done: each step of that version must be
// here, of the same kind, with the same parents and output type, and the
// input types must agree. The engine checks it against the version's
// shape as registered on it (side by side) or as recorded by the store's
// runs. A run that cannot move anyway is left at its version and logged.
// It returns w. Call it while declaring the workflow.
func (w *Workflow[I]) Accepts(versions ...string) *Workflow[I] {
	d := w.defn()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.frozen {
		d.errs = append(d.errs, &DefinitionError{Workflow: d.name, Err: ErrWorkflowFrozen, Detail: "Accepts"})
		return w
	}
	for _, v := range versions {
		switch {
		case !dag.ValidVersion(v):
			d.errs = append(d.errs, &DefinitionError{Workflow: d.name, Err: ErrInvalidVersion,
				Detail: "Accepts(" + dag.Quote(v) + "): use 1-64 letters, digits or _-.+ starting with a letter or digit"})
		case !slices.Contains(d.accepts, v):
			d.accepts = append(d.accepts, v)
		}
	}
	return w
}

// AcceptsRunsOf is Accepts for older definitions of the workflow kept in
// code: it accepts the version of each (its Version) and, when that is a
// fingerprint, the version that releases of durable before fingerprint 2
// gave it, so that the runs those releases started move too. Each must
// be a definition of this workflow, declared in full before the call, and
// not this one. It returns w. Call it while declaring the workflow.
func (w *Workflow[I]) AcceptsRunsOf(old ...Definition) *Workflow[I] {
	d := w.defn()
	var versions []string
	var errs []error
	for _, o := range old {
		var od *workflowDef
		if o != nil {
			od = o.definition()
		}
		switch {
		case od == nil:
			errs = append(errs, &DefinitionError{Workflow: d.name, Err: ErrNilFunc, Detail: "AcceptsRunsOf(nil)"})
			continue
		case od == d:
			errs = append(errs, &DefinitionError{Workflow: d.name, Err: ErrInvalidOption, Detail: "AcceptsRunsOf: a definition cannot accept its own runs"})
			continue
		case od.name != d.name:
			errs = append(errs, &DefinitionError{Workflow: d.name, Err: ErrInvalidOption,
				Detail: "AcceptsRunsOf: " + dag.Quote(od.name) + " is another workflow"})
			continue
		}
		od.mu.Lock()
		versions = append(versions, od.versionLocked())
		if od.version == "" {
			versions = append(versions, od.legacyFingerprint())
		}
		od.mu.Unlock()
	}
	if len(errs) > 0 {
		d.mu.Lock()
		d.errs = append(d.errs, errs...)
		d.mu.Unlock()
	}
	return w.Accepts(versions...)
}

// Version returns the workflow's version: the one set by WithVersion, or
// else the fingerprint of its definition as declared so far (declare
// every step first). A definition with errors has the version of what it
// declared without them.
//
// The fingerprint is 12 hex digits. It covers the workflow's name and what
// runs in flight rely on: the steps, their kinds and edges, and the JSON
// shapes of the input and of the steps' outputs (field JSON names and
// value kinds, nested), not Go type names or packages, field order or
// omitempty (docs/semantics.md, "Versions and deploys"). Releases before
// fingerprint 2 fingerprinted Go type names too, and not the workflow's
// name: an engine serves the runs pinned to that legacy version of a
// definition as runs of its version, and its worker record lists the
// legacy version as accepted.
//
// Pass the version to Accepts, or the older definition itself to
// AcceptsRunsOf, when a newer definition takes its runs on.
func (w *Workflow[I]) Version() string {
	d := w.definition()
	if d == nil {
		return ""
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.versionLocked()
}

func (d *workflowDef) versionLocked() string {
	if d.version != "" {
		return d.version
	}
	return d.fingerprint()
}

// fingerprintLen is the length of a fingerprint, in hex digits: 48 bits,
// plenty to tell apart the versions of one workflow.
const fingerprintLen = 12

// fingerprint is the default version of d: the first 12 hex digits of the
// SHA-256 of the workflow's name and of what runs in flight rely on
// (docs/semantics.md, "Versions and deploys"): the input's JSON shape; each step's
// name, kind, parents, skip edges, output's JSON shape and what it waits
// for, starts or maps over; and whether there is an on-failure handler.
// A JSON shape (jsonShape) is what encoding/json reads and writes: Go type
// names and package paths are not covered, so renaming a type or moving
// it to another package keeps the version. Step code, retry policies,
// timeouts, a sleep's length and concurrency or rate limits are not
// covered either: runs take those from their recorded shape.
func (d *workflowDef) fingerprint() string {
	return d.fingerprintOf("durable/fingerprint/2\nworkflow "+strconv.Quote(d.name)+"\n", jsonShape)
}

// legacyFingerprint is the fingerprint that releases before fingerprint 2
// gave d (CHANGELOG, "Unreleased"): without the workflow's
// name, and with types described by their Go names and package paths as
// well as their JSON structure. It must never change: runs started by
// those releases are pinned to it, and engines serve them as runs of d's
// version (registered.legacy).
func (d *workflowDef) legacyFingerprint() string {
	return d.fingerprintOf("durable/fingerprint/1\n", legacyTypeShape)
}

// fingerprintOf is the fingerprint of d that begins with head and
// describes types with shape.
func (d *workflowDef) fingerprintOf(head string, shape func(reflect.Type) string) string {
	var b strings.Builder
	b.WriteString(head)
	b.WriteString("input " + shape(d.inType) + "\n")
	for _, s := range d.steps {
		fmt.Fprintf(&b, "step %q kind=%s", s.name, s.kindOf())
		for _, p := range s.parents {
			fmt.Fprintf(&b, " parent=%q", p.name)
		}
		var skips []string
		for _, c := range s.skips {
			if c.parent != nil {
				skips = append(skips, c.parent.name)
			}
		}
		slices.Sort(skips)
		for _, p := range slices.Compact(skips) {
			fmt.Fprintf(&b, " skip=%q", p)
		}
		switch {
		case s.wait.signal != "":
			fmt.Fprintf(&b, " signal=%q", s.wait.signal)
		case s.child != nil && s.child.wf != nil && s.child.result != nil:
			fmt.Fprintf(&b, " child=%q result=%q", s.child.wf.name, s.child.result.name)
		case s.mapDef != nil && s.mapDef.over != nil:
			fmt.Fprintf(&b, " over=%q", s.mapDef.over.name)
		case s.mapDef != nil && s.mapDef.input != nil:
			// MapInput: its items' type, which a Map's list step's
			// output covers. (No release before fingerprint 2 had it, so
			// the legacy fingerprint of every earlier run is unchanged.)
			b.WriteString(" over=input item " + shape(s.mapDef.item))
		}
		b.WriteString(" output " + shape(s.out) + "\n")
	}
	if d.onFailure != nil {
		b.WriteString("on_failure\n")
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])[:fingerprintLen]
}

// legacyVersion returns the version the releases before fingerprint 2
// gave d, when its version is its fingerprint (not set by WithVersion or
// FuncVersion) and it does not accept its legacy version explicitly;
// else "".
func (d *workflowDef) legacyVersion() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.version != "" {
		return ""
	}
	v := d.legacyFingerprint()
	if slices.Contains(d.accepts, v) || v == d.fingerprint() {
		return ""
	}
	return v
}

// kindOf is the kind a fingerprint records for s: dag.KindOf of its spec,
// as build records it (checkKind; the errors it finds are build's to
// report).
func (s *stepDef) kindOf() durabletype.TaskKind {
	spec := durabletype.StepSpec{Sleep: s.sleep}
	s.checkKind(&spec, func(error, string) {})
	return dag.KindOf(&spec)
}

// typeName is how a shape records a Go type: its name as Go prints it.
func typeName(t reflect.Type) string {
	if t == nil {
		return ""
	}
	return t.String()
}

var (
	jsonMarshaler   = reflect.TypeFor[json.Marshaler]()
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textMarshaler   = reflect.TypeFor[encoding.TextMarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// legacyTypeShape describes t for a legacy fingerprint: its name, and for
// a type that does not encode itself, its JSON structure. It must never
// change (see legacyFingerprint).
func legacyTypeShape(t reflect.Type) string {
	var b strings.Builder
	writeLegacyTypeShape(&b, t, map[reflect.Type]bool{})
	return b.String()
}

func writeLegacyTypeShape(b *strings.Builder, t reflect.Type, seen map[reflect.Type]bool) {
	if t == nil {
		b.WriteString("nil")
		return
	}
	if t.Name() != "" {
		b.WriteString(t.PkgPath() + "." + t.Name())
		if seen[t] || t.PkgPath() == "" || encodesItself(t) {
			return
		}
		seen[t] = true
		defer delete(seen, t)
		b.WriteString("=")
	}
	switch t.Kind() {
	case reflect.Pointer:
		b.WriteString("*")
		writeLegacyTypeShape(b, t.Elem(), seen)
	case reflect.Slice:
		b.WriteString("[]")
		writeLegacyTypeShape(b, t.Elem(), seen)
	case reflect.Array:
		b.WriteString("[" + strconv.Itoa(t.Len()) + "]")
		writeLegacyTypeShape(b, t.Elem(), seen)
	case reflect.Map:
		b.WriteString("map[")
		writeLegacyTypeShape(b, t.Key(), seen)
		b.WriteString("]")
		writeLegacyTypeShape(b, t.Elem(), seen)
	case reflect.Struct:
		b.WriteString("struct{")
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() && !f.Anonymous {
				continue
			}
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			fmt.Fprintf(b, "%s %q ", f.Name, tag)
			writeLegacyTypeShape(b, f.Type, seen)
			b.WriteString(";")
		}
		b.WriteString("}")
	default:
		b.WriteString(t.Kind().String())
	}
}

// encodesItself reports whether values of t (or *t) encode themselves in
// JSON or text: their structure is theirs to keep compatible.
func encodesItself(t reflect.Type) bool {
	for _, x := range []reflect.Type{t, reflect.PointerTo(t)} {
		if x.Implements(jsonMarshaler) || x.Implements(jsonUnmarshaler) ||
			x.Implements(textMarshaler) || x.Implements(textUnmarshaler) {
			return true
		}
	}
	return false
}

// VersionInfo describes one version of a workflow: registered on this
// engine, served or accepted by a live worker, or recorded by runs in the
// store.
type VersionInfo struct {
	Workflow string
	Version  string
	// Registered is set when this engine registered the version; Newest
	// when it is the one this engine starts by name.
	Registered, Newest bool
	// Accepts lists the versions this one accepts, when it is registered
	// here.
	Accepts []string
	// LegacyOf is set on the version id that releases of durable before
	// fingerprint 2 gave a definition registered here: its runs are
	// served as runs of that definition's version, LegacyOf (see
	// Workflow.Version).
	LegacyOf string
	// Input names the Go type of the workflow's input; Steps and
	// OnFailure are its DAG, as registered here or as runs recorded it
	// (nil when neither is known: a version only a worker lists).
	Input     string
	Steps     []StepInfo
	OnFailure bool
	// InFlight counts the runs pinned to the version that have not
	// settled; Ready their steps waiting for a worker.
	InFlight, Ready int
	// Workers lists the IDs of the live workers that serve the version;
	// AcceptedBy those that accept it (they move its runs to a version
	// they serve).
	Workers, AcceptedBy []string
	// RecordedAt is when a run first recorded the version; zero if no run
	// did (or its record was pruned with its runs).
	RecordedAt time.Time
}

// Unserved reports whether the version has runs in flight that no live
// worker serves or accepts: they wait until one starts, or until they are
// moved to another version (UpgradeRuns).
func (v *VersionInfo) Unserved() bool {
	return v.InFlight > 0 && len(v.Workers) == 0 && len(v.AcceptedBy) == 0
}

// Versions describes the versions of workflow (of every workflow when it
// is empty) known to this engine, its store and the live workers, by
// workflow and newest first: what `durable workflows` shows. It reads the
// store's versions, stats and workers. A workflow that breaks the rule of
// names is an *InvalidValueError (matching ErrInvalidName); a valid one
// that nothing knows gives none.
func (e *Engine) Versions(ctx context.Context, workflow string) ([]VersionInfo, error) {
	if workflow != "" {
		if err := dag.NameRule.Check("workflow", workflow); err != nil {
			return nil, err
		}
	}
	type key struct{ workflow, version string }
	byKey := map[key]*VersionInfo{}
	var order []key
	get := func(w, v string) *VersionInfo {
		k := key{w, v}
		if x := byKey[k]; x != nil {
			return x
		}
		byKey[k] = &VersionInfo{Workflow: w, Version: v}
		order = append(order, k)
		return byKey[k]
	}
	want := func(w string) bool { return workflow == "" || w == workflow }
	setShape := func(x *VersionInfo, sh *durabletype.Shape) {
		x.Input, x.Steps, x.OnFailure = sh.Input, stepsOf(sh), sh.OnFailure != nil
	}

	e.mu.Lock()
	reg := e.reg
	e.mu.Unlock()
	for _, name := range reg.names {
		if !want(name) {
			continue
		}
		newest := reg.newest(name)
		for _, r := range reg.byName[name] {
			x := get(name, r.shape.Version)
			x.Registered, x.Newest, x.Accepts = true, r == newest, slices.Clone(r.d.accepts)
			setShape(x, r.shape)
		}
	}
	legacyOf := func(w, v string) string {
		for _, r := range reg.byName[w] {
			if r.legacy == v {
				return r.shape.Version
			}
		}
		return ""
	}
	if vs := e.versioner(); vs != nil {
		res, err := vs.ListVersions(ctx, &store.ListVersionsParams{Workflow: workflow})
		if err != nil {
			return nil, fmt.Errorf("durable: versions: %w", err)
		}
		for _, rec := range res.Versions {
			x := get(rec.Workflow, rec.Version)
			if x.RecordedAt.IsZero() || rec.RecordedAt.Before(x.RecordedAt) {
				x.RecordedAt = rec.RecordedAt
			}
			if x.Steps == nil && !slices.ContainsFunc(rec.Shape.Steps, func(s durabletype.StepSpec) bool { return s.Retired }) {
				setShape(x, rec.Shape)
			}
		}
	}
	st, err := e.Stats(ctx, StatsOptions{})
	if err != nil {
		return nil, err
	}
	for _, q := range st.Queues {
		if want(q.Workflow) {
			get(q.Workflow, q.Version).Ready += q.Ready
		}
	}
	for _, c := range st.Runs {
		if !c.Settled && want(c.Workflow) {
			get(c.Workflow, c.Version).InFlight += c.Count
		}
	}
	workers, err := e.Workers(ctx)
	if err != nil && !errors.Is(err, ErrWorkersUnsupported) {
		return nil, err
	}
	for _, w := range workers {
		if !w.Live {
			continue
		}
		for _, v := range w.Versions {
			if want(v.Workflow) {
				x := get(v.Workflow, v.Version)
				x.Workers = append(x.Workers, w.ID)
			}
		}
		for _, v := range w.Accepts {
			if want(v.Workflow) {
				x := get(v.Workflow, v.Version)
				x.AcceptedBy = append(x.AcceptedBy, w.ID)
			}
		}
	}
	// A worker older than versions serves every version of its workflows.
	for _, w := range workers {
		if !w.Live || len(w.Versions) > 0 {
			continue
		}
		for _, k := range order {
			if slices.Contains(w.Workflows, k.workflow) {
				byKey[k].Workers = append(byKey[k].Workers, w.ID)
			}
		}
	}
	out := make([]VersionInfo, 0, len(order))
	for _, k := range order {
		x := byKey[k]
		if !x.Registered {
			x.LegacyOf = legacyOf(k.workflow, k.version)
		}
		// A legacy version that no run recorded is only an alias that the
		// workers list: nothing to show.
		if x.LegacyOf != "" && x.RecordedAt.IsZero() && x.InFlight == 0 && x.Ready == 0 {
			continue
		}
		out = append(out, *x)
	}
	slices.SortStableFunc(out, func(a, b VersionInfo) int {
		return cmp.Or(cmp.Compare(a.Workflow, b.Workflow), compareNewest(&a, &b), cmp.Compare(a.Version, b.Version))
	})
	return out, nil
}

// compareNewest orders versions newest first: the newest registered, then
// by when runs first recorded them (not recorded yet counts as newest).
func compareNewest(a, b *VersionInfo) int {
	switch {
	case a.Newest != b.Newest:
		if a.Newest {
			return -1
		}
		return 1
	case a.RecordedAt.IsZero() != b.RecordedAt.IsZero():
		if a.RecordedAt.IsZero() {
			return -1
		}
		return 1
	}
	return b.RecordedAt.Compare(a.RecordedAt)
}

// Warnings of a process that starts runs of a version it does not serve
// (docs/operating.md, "Deploys"): a process that only triggers runs (a
// client, an HTTP API) and was not deployed with the workers' definition
// keeps starting runs of its own version, which no live worker runs.

// staleCheckInterval is how long an engine trusts what it read of the
// workers serving a version it starts runs of, and so how often at most
// it logs a warning about that version.
const staleCheckInterval = time.Minute

// staleCheckTimeout bounds the read of the workers behind a trigger.
const staleCheckTimeout = 5 * time.Second

// staleChecks are what an engine read of the workers serving the
// versions it starts runs of without serving them itself.
type staleChecks struct {
	mu sync.Mutex
	by map[WorkflowVersion]*staleCheck
}

// staleCheck is what an engine read of the workers serving one version.
type staleCheck struct {
	at      time.Time // when it was read
	reading bool      // another trigger reads it now
	warning string
}

// startWarning returns what Started.Warning says of runs of workflow at
// version that this engine just started: a warning when no live worker
// serves (or accepts) that version while live workers serve other
// versions of the workflow, "" otherwise, and always "" when this engine
// is started and serves that version itself. It reads the workers at
// most once per staleCheckInterval per version (a trigger meanwhile gets
// the last answer), and logs each warning it reads.
func (e *Engine) startWarning(ctx context.Context, workflow, version string) string {
	e.mu.Lock()
	serves := e.rt != nil && !e.stopped && e.reg.serving(workflow, version) != nil
	e.mu.Unlock()
	if serves {
		return ""
	}
	k := WorkflowVersion{workflow, version}
	now := time.Now()
	c := &e.staleChecks
	c.mu.Lock()
	x := c.by[k]
	if x != nil && (x.reading || now.Sub(x.at) < staleCheckInterval) {
		defer c.mu.Unlock()
		return x.warning
	}
	if x == nil {
		if c.by == nil {
			c.by = map[WorkflowVersion]*staleCheck{}
		}
		x = &staleCheck{}
		c.by[k] = x
	}
	x.reading = true
	c.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), staleCheckTimeout)
	warning, others, err := e.staleVersion(ctx, workflow, version)
	cancel()
	c.mu.Lock()
	x.reading, x.at = false, now
	if err == nil {
		x.warning = warning
	}
	warning = x.warning
	c.mu.Unlock()
	if err == nil && warning != "" {
		e.log.Warn("durable: starting runs of a version that no live worker serves", slog.String("workflow", workflow),
			slog.String("version", version), slog.Any("served_versions", others))
	}
	return warning
}

// staleVersion reads the workers and returns the warning of startWarning
// for runs of workflow at version, and the versions of the workflow that
// live workers serve.
func (e *Engine) staleVersion(ctx context.Context, workflow, version string) (string, []string, error) {
	ws, err := e.Workers(ctx)
	if err != nil {
		return "", nil, err
	}
	var others []string
	for _, w := range ws {
		if w.ServesVersion(workflow, version) {
			return "", nil, nil
		}
		if !w.Live {
			continue
		}
		for _, v := range w.Versions {
			if v.Workflow == workflow && !slices.Contains(others, v.Version) {
				others = append(others, v.Version)
			}
		}
	}
	if len(others) == 0 {
		return "", nil, nil // no worker serves the workflow yet: nothing is stale
	}
	slices.Sort(others)
	quoted := make([]string, len(others))
	for i, v := range others {
		quoted[i] = dag.Quote(v)
	}
	return fmt.Sprintf("no live worker serves version %s of workflow %s, which this process starts runs of; live workers serve %s: "+
		"its runs wait until a worker of that version starts, or until they are moved to another version "+
		"(Workflow.Accepts, Engine.UpgradeRuns); unless a deploy is under way, deploy this process with the workers' definition",
		dag.Quote(version), dag.Quote(workflow), strings.Join(quoted, ", ")), others, nil
}
