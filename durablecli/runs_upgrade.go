package durablecli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable"
	"github.com/effectivelabs/durable/durablejson"
	"github.com/effectivelabs/durable/internal/core/dag"
)

const runsUpgradeUsage = `Usage: {name} runs upgrade --workflow W --from X --to Y --database-url URL [flags]

Moves the runs of workflow W pinned to version X that have not settled to
version Y, each in one transaction: from then on only the workers of
version Y run their steps. A run moves with what it did: its finished
steps keep their outputs (one that Y lacks or changed is kept for the
run's record, retired, and never runs again), the steps Y adds run once
their parents are done, and its unfinished steps go on where they are. A
run whose unfinished steps Y cannot run the same way (a step missing, of
another kind, with other parents or another output type), or that failed,
is refused and stays at X. See docs/semantics.md, "Versions and deploys".

Y must be registered by this program or recorded by a run ("{name}
workflows" lists the versions, and which are unserved). Every run of
version X in flight moves; with --run (repeated), only those runs, each of
which must be at version X; with --tenant, only that tenant's runs. With
--dry-run, every run is checked and none moves.

Prints "<id> moved" ("<id> would move" with --dry-run) for each run that
moved, on stderr "run <id> refused: <reason>" for each refused run (the
step at fault and why), then "moved N runs of workflow W from version X to
Y (M refused)".

With --json, one JSON object, the one POST /api/v1/workflows/W/upgrade of
"{name} serve" answers:
  {"workflow", "from", "to", "tenant", "dry_run",
   "moved": [RUN_ID, ...],
   "refused": [{"run_id", "code", "reason", "step", "error"}, ...]}
where "code" is "incompatible" (version Y cannot run the step "step",
or, when "step" is empty, the run), "version_mismatch" (the run is at
another version), "run_settled" or "run_not_found", "reason" the same
by its older names ("incompatible", "version_mismatch", "settled",
"not_found"), and "error" says it in words.

Exit status: 0 every run asked moved (with --dry-run: would move), or no
run of version X was in flight; 1 some were refused (with --dry-run: would
be), or database errors; 2 bad flags: --workflow, --from or --to missing
or invalid, --from equal to --to, a bad --run or --tenant, or a version
unknown here (a --to that this program does not register and no run
recorded, or a --from that nothing registers, records or serves); the
error then lists the versions known.

Flags:
`

// runIDs is a flag given once per run ID.
type runIDs []uuid.UUID

func (r *runIDs) String() string {
	if r == nil {
		return ""
	}
	s := make([]string, len(*r))
	for i, id := range *r {
		s[i] = id.String()
	}
	return strings.Join(s, ",")
}

func (r *runIDs) Set(s string) error {
	id, err := uuid.Parse(s)
	if err != nil {
		return fmt.Errorf("not a run ID: %w", err)
	}
	if !slices.Contains(*r, id) {
		*r = append(*r, id)
	}
	return nil
}

func (c *cli) runsUpgrade(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := c.newRunsAction("upgrade", runsUpgradeUsage, stderr)
	workflow := a.fs.String("workflow", "", "the workflow whose runs move (required)")
	from := a.fs.String("from", "", "the version the runs move from (required)")
	to := a.fs.String("to", "", "the version the runs move to: registered by this program or recorded by a run (required)")
	var ids runIDs
	a.fs.Var(&ids, "run", "move only the run `RUN_ID` (repeat the flag for more); default: every run of --from in flight")
	tenant := a.fs.String("tenant", "", "move only this tenant's runs")
	dryRun := a.fs.Bool("dry-run", false, "check every run and report what would move and what would be refused; move none")
	asJSON := a.fs.Bool("json", false, "print one JSON object")
	if _, code := a.parse(args, 0); code >= 0 {
		return code
	}
	tenantGiven := false
	a.fs.Visit(func(f *flag.Flag) { tenantGiven = tenantGiven || f.Name == "tenant" })
	switch {
	case *workflow == "":
		return a.usageErr("--workflow is required")
	case *from == "" || *to == "":
		return a.usageErr("--from and --to are required: the versions the runs move from and to (\"%s workflows\" lists them)", c.name)
	}
	vs := []value{req(dag.NameRule, "--workflow", *workflow), req(dag.VersionRule, "--from", *from), req(dag.VersionRule, "--to", *to)}
	if tenantGiven {
		vs = append(vs, req(dag.TenantRule, "--tenant", *tenant))
	}
	if code := a.check(vs...); code >= 0 {
		return code
	}
	if *from == *to {
		return a.usageErr("--from and --to are both %s: the runs are at that version already", dag.Quote(*from))
	}

	op, err := a.c.openRegistered(ctx, a.db, "runs-upgrade", a.stderr)
	if err != nil {
		return a.fail(err)
	}
	defer op.close()
	opts := durable.UpgradeOptions{IDs: ids, DryRun: *dryRun}
	var res *durable.UpgradeResult
	if tenantGiven {
		res, err = op.e.Tenant(*tenant).UpgradeRuns(ctx, *workflow, *from, *to, opts)
	} else {
		res, err = op.e.UpgradeRuns(ctx, *workflow, *from, *to, opts)
	}
	switch {
	case errors.Is(err, durable.ErrUnknownVersion):
		return a.unknownVersion(ctx, op, *workflow, *to)
	case errors.Is(err, durable.ErrInvalidName), errors.Is(err, durable.ErrInvalidVersion), errors.Is(err, durable.ErrInvalidOption):
		return a.usageErr("%v", err)
	}
	if err == nil && len(ids) == 0 && len(res.Moved) == 0 && len(res.Refused) == 0 {
		vs, verr := op.e.Versions(ctx, *workflow)
		if verr != nil {
			return a.fail(verr)
		}
		if !slices.ContainsFunc(vs, func(x durable.VersionInfo) bool { return x.Version == *from }) {
			return a.unknownVersion(ctx, op, *workflow, *from)
		}
	}

	out := durablejson.NewUpgrade(*workflow, *from, *to, *tenant, *dryRun, res)
	// After an error, what moved before it, if anything, is printed.
	switch {
	case err != nil && len(out.Moved) == 0 && len(out.Refused) == 0:
	case *asJSON:
		if code := a.printJSON(stdout, out); code != 0 {
			return code
		}
	default:
		printUpgrade(stdout, a.stderr, a.c.name+" "+a.fs.Name(), out, len(ids) > 0)
	}
	switch {
	case err != nil:
		return a.fail(err)
	case len(out.Refused) > 0:
		return 1
	}
	return 0
}

// printUpgrade prints what an upgrade moved and, on stderr, what it
// refused; prefix names the command.
func printUpgrade(stdout, stderr io.Writer, prefix string, u *durablejson.Upgrade, byID bool) {
	verb, refused := "moved", "refused"
	if u.DryRun {
		verb, refused = "would move", "would be refused"
	}
	for _, id := range u.Moved {
		fmt.Fprintf(stdout, "%s %s\n", id, verb)
	}
	for _, r := range u.Refused {
		fmt.Fprintf(stderr, "%s: run %s %s: %s\n", prefix, r.RunID, refused, r.Error)
	}
	workflow := "workflow " + dag.Quote(u.Workflow)
	if u.Tenant != "" {
		workflow += " (tenant " + dag.Quote(u.Tenant) + ")"
	}
	if len(u.Moved) == 0 && len(u.Refused) == 0 && !byID {
		fmt.Fprintf(stdout, "no run of %s at version %s is in flight: nothing to move\n", workflow, dag.Quote(u.From))
		return
	}
	fmt.Fprintf(stdout, "%s %s of %s from version %s to %s (%d %s)\n", verb, plural(len(u.Moved), "run"),
		workflow, dag.Quote(u.From), dag.Quote(u.To), len(u.Refused), refused)
}

// unknownVersion reports a version of workflow that this program does not
// register and that no run recorded, with the versions known here; it
// returns the exit status (usage).
func (a *runsAction) unknownVersion(ctx context.Context, op *operator, workflow, version string) int {
	vs, err := op.e.Versions(ctx, workflow)
	if err != nil {
		return a.fail(err)
	}
	msg := fmt.Sprintf("unknown version %s of workflow %s: this program does not register it and no run recorded it", dag.Quote(version), dag.Quote(workflow))
	if len(vs) == 0 {
		return a.usageErr("%s; no version of the workflow is known here (\"%s workflows\" lists the workflows)", msg, a.c.name)
	}
	known := make([]string, len(vs))
	for i := range vs {
		known[i] = describeVersion(&vs[i])
	}
	fmt.Fprintf(a.stderr, "%s %s: %s; its versions known here:\n  %s\n", a.c.name, a.fs.Name(), msg, strings.Join(known, "\n  "))
	if slices.ContainsFunc(vs, func(x durable.VersionInfo) bool { return x.Version == version }) {
		fmt.Fprintf(a.stderr, "(version %s is served by live workers, but its DAG is unknown here: run the upgrade with the program that registers it)\n", dag.Quote(version))
	}
	return exitUsage
}

// describeVersion names a version and says what is known of it, on one
// line.
func describeVersion(x *durable.VersionInfo) string {
	var notes []string
	switch {
	case x.Newest:
		notes = append(notes, "newest registered here")
	case x.Registered:
		notes = append(notes, "registered here")
	}
	notes = append(notes, plural(x.InFlight, "run")+" in flight")
	if len(x.Workers) > 0 {
		notes = append(notes, "served by "+plural(len(x.Workers), "live worker"))
	}
	if x.Unserved() {
		notes = append(notes, "UNSERVED")
	}
	if x.Steps == nil {
		notes = append(notes, "DAG unknown here: cannot be moved to")
	}
	return versionCell(x.Version) + " (" + strings.Join(notes, ", ") + ")"
}
