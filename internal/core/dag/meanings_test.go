package dag

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/store"
)

// TestStatusesAskedByMeaning holds the core to asking what a run status
// means (durabletype.RunStatus's predicates) instead of naming statuses: a
// comparison of a status with a RunStatus constant (==, !=, a case of a
// switch) outside the few places that name a status for itself fails
// here, so that a new status (PAUSED) cannot be forgotten by a rule that
// lists the old ones. Setting a status (a transition) is not a
// comparison and stays.
func TestStatusesAskedByMeaning(t *testing.T) {
	t.Parallel()
	// Each allowed comparison, by function, says why it names a status.
	allowed := map[string]string{
		"LostToCancel": "the worker is told the reason of CANCELLED itself",
	}
	constName := func(e ast.Expr) (string, bool) {
		sel, ok := e.(*ast.SelectorExpr)
		if !ok {
			return "", false
		}
		if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "durabletype" {
			return "", false
		}
		return sel.Sel.Name, runStatusConst[sel.Sel.Name]
	}
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	checked := 0
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, 0)
		require.NoError(t, err)
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				var found []ast.Expr
				switch n := n.(type) {
				case *ast.BinaryExpr:
					if n.Op == token.EQL || n.Op == token.NEQ {
						found = append(found, n.X, n.Y)
					}
				case *ast.CaseClause:
					found = append(found, n.List...)
				}
				for _, e := range found {
					name, ok := constName(e)
					if !ok {
						continue
					}
					checked++
					if _, ok := allowed[fn.Name.Name]; !ok {
						t.Errorf("%s: %s compares a run status with durabletype.%s: ask what the status means "+
							"(Settled, InFlight, Active, Unsuccessful, Allows) instead", fset.Position(e.Pos()), fn.Name.Name, name)
					}
				}
				return true
			})
		}
	}
	require.Positive(t, checked, "the allowed comparisons were not found: the scan sees nothing")
	require.Len(t, runStatusConst, len(durabletype.RunStatuses), "runStatusConst names every run status")
}

// runStatusConst names the constants of durabletype's run statuses: those
// durabletype/run.go declares of type RunStatus.
var runStatusConst = func() map[string]bool {
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", "..", "..", "durabletype", "run.go"), nil, 0)
	if err != nil {
		panic(err)
	}
	names := map[string]bool{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			v := spec.(*ast.ValueSpec)
			if id, ok := v.Type.(*ast.Ident); ok && id.Name == "RunStatus" {
				for _, n := range v.Names {
					names[n.Name] = true
				}
			}
		}
	}
	return names
}()

// TestRunInFlightAndCancellable: a run is in flight while its status is,
// and after, until it settles (FAILED, its handler running); it may be
// cancelled while its status allows it or its unsuccessful settlement is
// under way, never once settled.
func TestRunInFlightAndCancellable(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, s := range durabletype.RunStatuses {
		for _, finished := range []bool{false, true} {
			if s.InFlight() && finished {
				continue // a run whose status is in flight has no finish time
			}
			rec := store.Run{Status: s}
			if finished {
				rec.FinishedAt = at
			}
			name := string(s)
			if !finished {
				name += " (settling)"
			}
			require.Equal(t, !finished, InFlight(&rec), name)
			require.Equal(t, !finished && (s.Allows(durabletype.ActionCancel) || s.Unsuccessful()), Cancellable(&rec), name)
		}
	}
	running := store.Run{Status: durabletype.RunRunning}
	require.True(t, InFlight(&running))
	require.True(t, Cancellable(&running))
	failing := store.Run{Status: durabletype.RunFailed}
	require.True(t, InFlight(&failing), "a failed run whose handler runs is in flight")
	require.True(t, Cancellable(&failing), "and may be cancelled")
	done := store.Run{Status: durabletype.RunCompleted, FinishedAt: at}
	require.False(t, InFlight(&done))
	require.False(t, Cancellable(&done))
}
