// Package durabletype is durable's vocabulary: the names that users, store
// drivers and the CLI share, so that each of them imports them from one
// place.
//
// It holds what a user of durable sees, whichever package hands it over:
//
//   - runs: RunStatus and its values (RunRunning, RunCompleted, RunFailed,
//     RunCancelled), RunSummary (a run as a listing shows it), ParentRef
//     (a child run's parent);
//   - steps: TaskState and its values (a step of a run is a task; a map
//     step has one task per item), TaskKind and its values, OnFailureTask
//     (the name of a run's on-failure handler);
//   - events: Event and EventType, the entries of a run's log;
//   - shapes: Shape and its StepSpec, the DAG of a workflow as a run or a
//     schedule recorded it (RetryPolicy here is the policy recorded for a
//     step, not durable.RetryPolicy, which a workflow's author sets);
//   - counts: Stats, QueueStats and RunCount;
//   - storage: Storage and TableStorage, the sizes and dead rows of a
//     store's tables;
//   - schedules: Schedule and ScheduleKey;
//   - errors: the sentinel errors a store returns and the engine passes on
//     (ErrRunNotFound, ErrIncompatible, ...), to match with errors.Is, and
//     Transient, which marks an error as worth trying again (ErrTransient).
//
// What only a store driver sees (the Store interface and its optional
// interfaces, the params and results of its calls, claimed tasks and
// outcomes, notifications, the records of runs, tasks and workers it
// returns) is package store. Package durable's own API (RunResult,
// StepResult, RunFilter, RetryPolicy, ...) is package durable.
//
// # A leaf
//
// durabletype imports nothing of durable: only the standard library and
// github.com/google/uuid. Every other package of the module may import it,
// store included, and none of them is imported by it; that is what lets
// users, drivers and the CLI share it without import cycles. A name belongs
// here when a user can meet it through durable's API and it needs nothing
// but other names of this package; a name that would need store, dag or the
// engine stays where it is.
//
// The root package durable re-exported most of these names as aliases
// (durable.RunCompleted, durable.StepState, ...). Those aliases are
// deprecated and go in the next release; the names that differed map to
// the names here: durable.StepState is TaskState, durable.StepCompleted is
// TaskCompleted (and so on for every step state), durable.OnFailureStep is
// OnFailureTask. The errors are the exception: package durable keeps its
// names for the errors its calls return (durable.ErrRunNotFound is
// ErrRunNotFound, the same value), so that a caller matches them where it
// called, beside the engine's own errors (durable.ErrRunFailed, ...).
package durabletype
