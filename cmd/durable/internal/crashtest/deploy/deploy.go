// Package deploy is the service of the rolling-deploy crash proof
// (cmd/durable/internal/crashtest, TestRollingDeploy): two builds of one
// service, old and new, whose three workflows change between them as
// deploys do:
//
//   - deploy-add: old a → nap → b; new a → nap → b → c (a step added).
//     The new build accepts the old version's runs (Workflow.Accepts).
//   - deploy-remove: old a → nap → b → c; new a → nap → b (a step
//     removed). Old runs cannot move: they are served by old workers only.
//   - deploy-type: a's output is an int in the old build, a string in the
//     new one (an output type changed). Old runs cannot move either.
//
// nap is a durable sleep, so that runs sleep across the deploy. Every step
// records which build ran it, at which version, through Recorder.
package deploy

import (
	"strconv"
	"time"

	"github.com/effectivelabs/durable"
)

// Input is the input of every workflow of the service.
type Input struct {
	N int `json:"n"`
}

// Recorder records that build ran step of the current run of workflow at
// version.
type Recorder func(ctx durable.Context, build, workflow, version, step string) error

// Build is one build of the service.
type Build struct {
	Label              string
	Add, Remove, Types *durable.Workflow[Input]
}

// All returns the build's workflows.
func (b *Build) All() []durable.Definition {
	return []durable.Definition{b.Add, b.Remove, b.Types}
}

// Names of the workflows.
const (
	Add    = "deploy-add"
	Remove = "deploy-remove"
	Types  = "deploy-type"
)

// New returns build label ("old" or "new"), its sleeps nap long. With
// sameVersion every workflow of both builds has version "1", as every
// deploy had before versions (a deploy then fails runs: the proof's
// control). rec may be nil.
func New(label string, nap time.Duration, sameVersion bool, rec Recorder) *Build {
	isNew := label == "new"
	b := &Build{Label: label}
	var add, remove []string
	if isNew {
		add, remove = []string{"a", "b", "c"}, []string{"a", "b"}
	} else {
		add, remove = []string{"a", "b"}, []string{"a", "b", "c"}
	}
	b.Add = chain(Add, label, add, nap, sameVersion, rec)
	b.Remove = chain(Remove, label, remove, nap, sameVersion, rec)
	b.Types = typed(label, isNew, nap, sameVersion, rec)
	if isNew && !sameVersion {
		b.Add.Accepts(New("old", nap, false, nil).Add.Version())
	}
	return b
}

// chain is a → nap → the other steps, each returning its input's N.
func chain(name, label string, steps []string, nap time.Duration, sameVersion bool, rec Recorder) *durable.Workflow[Input] {
	wf := durable.NewWorkflow[Input](name)
	if sameVersion {
		wf.WithVersion("1")
	}
	var prev durable.Parent
	for i, s := range steps {
		var opts []durable.StepOption
		if prev != nil {
			opts = append(opts, durable.After(prev))
		}
		prev = durable.Step(wf, s, step[int](wf, label, s, rec, func(in Input) int { return in.N }), opts...)
		if i == 0 {
			prev = durable.Sleep(wf, "nap", nap, durable.After(prev))
		}
	}
	return wf
}

// typed is a → nap → b, a's output an int in the old build and a string
// in the new one.
func typed(label string, isNew bool, nap time.Duration, sameVersion bool, rec Recorder) *durable.Workflow[Input] {
	wf := durable.NewWorkflow[Input](Types)
	if sameVersion {
		wf.WithVersion("1")
	}
	var a durable.Parent
	if isNew {
		a = durable.Step(wf, "a", step[string](wf, label, "a", rec, func(in Input) string { return strconv.Itoa(in.N) }))
	} else {
		a = durable.Step(wf, "a", step[int](wf, label, "a", rec, func(in Input) int { return in.N }))
	}
	n := durable.Sleep(wf, "nap", nap, durable.After(a))
	durable.Step(wf, "b", step[int](wf, label, "b", rec, func(in Input) int { return in.N }), durable.After(n))
	return wf
}

// step returns a step function that records its execution, then returns
// out(in).
func step[O any](wf *durable.Workflow[Input], label, name string, rec Recorder, out func(Input) O) func(durable.Context, Input) (O, error) {
	return func(ctx durable.Context, in Input) (O, error) {
		if rec != nil {
			if err := rec(ctx, label, wf.Name(), wf.Version(), name); err != nil {
				var zero O
				return zero, err
			}
		}
		return out(in), nil
	}
}
