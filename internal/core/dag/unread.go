package dag

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// Shapes this engine cannot read (docs/design.md, "Versions"). A newer
// release may record a shape with a feature this one does not know (a
// step kind, a field with a new meaning). A store that meets one while
// loading the runs of a call does not fail the call: the runs that need
// it are left alone, for an engine that can read them, and every other
// run of the call proceeds. What "left alone" means is decided here, for
// every transition:
//   - a left run is not in the call: no transition changes it, no timer
//     of it fires, none of its tasks is rescued, claimed or finished (an
//     outcome for it is FinishStale, as for a run gone);
//   - the messages pending for it stay pending (KeepsMessages), rather
//     than being dropped as those of a run gone are;
//   - an action on it (cancel, replay, upgrade) reports its *ShapeError
//     (Act), unless the action's tenant scope hides the run;
//   - a read of it reports the *ShapeError.

// ReadShape decodes and compiles a shape as a store recorded it (js, its
// JSON). A shape this engine cannot read is a *durabletype.ShapeError
// (matching durabletype.ErrUnknownShape) naming id; the store names the
// workflow of the run that needs it (ForRun).
//
// A field this engine does not know makes the shape unreadable too: it
// may be how a newer release records a new kind of step, which this
// engine would otherwise take for a plain one. (No release removed a
// field of durabletype.Shape: every shape recorded by this engine or an
// older one decodes.)
func ReadShape(id string, js []byte) (*Compiled, error) {
	var sh durabletype.Shape
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sh); err != nil {
		return nil, &durabletype.ShapeError{Shape: id, Reason: fmt.Errorf("decode: %w", err)}
	}
	c, err := Compile(&sh)
	if err != nil {
		return nil, &durabletype.ShapeError{Shape: id, Reason: err}
	}
	return c, nil
}

// Leave records that the change leaves run rec alone because its shape
// cannot be read (err, a *durabletype.ShapeError): the run is not loaded
// into the change, and the transitions treat it as above.
func (c *Change) Leave(rec store.Run, err error) {
	if c.left == nil {
		c.left = make(map[uuid.UUID]leftRun)
	}
	c.left[rec.ID] = leftRun{tenant: rec.Tenant, err: err}
}

// Left returns why the change leaves run id alone, nil when it does not.
func (c *Change) Left(id uuid.UUID) error {
	if l, ok := c.left[id]; ok {
		return l.err
	}
	return nil
}

// KeepsMessages reports whether the messages pending for run id stay
// pending rather than being taken by the call: the run is left alone.
func (c *Change) KeepsMessages(id uuid.UUID) bool {
	_, ok := c.left[id]
	return ok
}

// leftRun is a run the change leaves alone.
type leftRun struct {
	tenant string
	err    error
}

// ForRun returns err, a *durabletype.ShapeError of ReadShape, naming the
// workflow and tenant of run rec; other errors are returned as they are.
func ForRun(err error, rec *store.Run) error {
	se, ok := err.(*durabletype.ShapeError)
	if !ok {
		return err
	}
	cp := *se
	cp.Workflow, cp.Tenant = rec.Workflow, rec.Tenant
	return &cp
}
