package deploy

import (
	"strings"
	"time"

	"github.com/effectivelabs/durable"
)

// Func is the name of the service's durable function, and Patch the name
// of the patch marker its new build adds.
const (
	Func  = "deploy-fn"
	Patch = "add-audit"
)

// Paths of Func: the calls it made, as its output lists them.
const (
	OldPath = "a,b,c"
	NewPath = "a,audit,b,c"
)

// NewFunc returns build label's deploy-fn at version version, its sleeps
// nap long:
//
//	old: a → nap-1 → b → nap-2 → c
//	new: a → nap-1 → [Patched(add-audit): audit] → b → nap-2 → c
//
// The new build changes the code with durable.Patched: its runs, and the
// old runs that reach the marker on it (those sleeping in nap-1 at the
// deploy), take the new path, with the step audit; the old runs whose
// history went past that point (those in nap-2) take the old one. Its
// output is the path it took (OldPath or NewPath). Every step records its
// execution through rec (which may be nil) under the workflow Func.
func NewFunc(label string, nap time.Duration, version string, rec Recorder) *durable.Function[Input, string] {
	isNew := label == "new"
	return durable.NewFunction(Func, func(ctx durable.FuncContext, in Input) (string, error) {
		var path []string
		do := func(call string) error {
			_, err := durable.Do(ctx, call, func(sc durable.Context) (int, error) {
				if rec != nil {
					if err := rec(sc, label, Func, version, call); err != nil {
						return 0, err
					}
				}
				return in.N, nil
			})
			path = append(path, call)
			return err
		}
		if err := do("a"); err != nil {
			return "", err
		}
		durable.SleepFor(ctx, "nap-1", nap)
		if isNew && durable.Patched(ctx, Patch) {
			if err := do("audit"); err != nil {
				return "", err
			}
		}
		if err := do("b"); err != nil {
			return "", err
		}
		durable.SleepFor(ctx, "nap-2", nap)
		if err := do("c"); err != nil {
			return "", err
		}
		return strings.Join(path, ","), nil
	}, durable.FuncVersion(version))
}
