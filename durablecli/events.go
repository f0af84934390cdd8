package durablecli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/durablejson"
	"github.com/effectivelabs/durable/durabletype"
	"github.com/effectivelabs/durable/internal/core/dag"
)

// "durable events send" and "durable signal": what ends the wait of the
// steps declared with durable.WaitForEvent and durable.WaitForSignal.

const eventsUsage = `Usage: {name} events send --key K [--tenant T] [--payload JSON|--payload-file PATH] --database-url URL

  send    send an event to the steps of a tenant's runs waiting for its key

Every action needs --database-url (or $DURABLE_DATABASE_URL); the schema is
checked, never migrated. Run "{name} events <action> -h" for its flags.

Exit status: 0 done, 1 failed (database errors), 2 bad flags or arguments.
`

const eventsSendUsage = `Usage: {name} events send --key K [--tenant T] [--payload JSON|--payload-file PATH] --database-url URL

Sends an event with --key for the runs of --tenant: every step of the
tenant's runs waiting for that key (durable.WaitForEvent) receives
--payload as its output, exactly once, and its run goes on. The payload is
JSON text, passed on as it is (default null); --payload-file PATH reads it
from PATH instead ("-": the standard input), for payloads too large for
the command line. A waiting step that cannot read it as the type it
awaits (a number where it expects a string, say) refuses it and keeps
waiting: each refusal is printed on stderr, naming the run, the step,
where the payload does not fit and the shape the step expects, and is
recorded in the run's events. The event is also kept for a while, for
steps that begin waiting later and look back (durable.WithLookback);
those skip it if it does not fit.

Prints how many waiting steps received it, "delivered to N waiting steps"
(--json: {"delivered": N}, the answer of POST /api/v1/events, with
"refused": [...] when some step refused it). When none received it, a
warning on stderr says so, naming the tenant used (without --tenant, the
tenant "default": runs triggered for another tenant never see it) with a
hint. Delivering to none is not an error by default, since the event is
kept for steps that begin waiting later and look back; with
--require-delivery it is (exit status 4), for scripts that expect a
waiting step to go on.

Exit status: 0 sent, 1 failed (database errors), 2 bad flags (a missing
or invalid key, an invalid tenant, a payload that is not JSON or is over
the size limit, 1 MiB by default), 3 sent, but some waiting steps refused
the payload, 4 sent, but no step was waiting for it (--require-delivery
only).

Flags:
`

const signalUsage = `Usage: {name} signal RUN_ID NAME [--payload JSON|--payload-file PATH] [--tenant T] --database-url URL

Sends the signal NAME to the run RUN_ID: every step of the run waiting for
it (durable.WaitForSignal) receives --payload as its output, and the signal
is kept with the run, so that a step that begins waiting for it later
receives it too. The payload is JSON text, passed on as it is (default
null); --payload-file PATH reads it from PATH instead ("-": the standard
input). A waiting step that cannot read it as the type it awaits refuses
it and keeps waiting: each refusal is printed on stderr (the run, the
step, why, the shape expected) and recorded in the run's events. With
--tenant, a run of another tenant is not found.

Prints "signal NAME sent to run RUN_ID".

Exit status: 0 sent, 1 failed (the run was not found or has settled, said
on stderr; database errors), 2 bad flags or arguments (a run ID that is
not a UUID, an invalid NAME, a payload that is not JSON or is over the
size limit, 1 MiB by default), 3 sent, but some waiting steps refused the
payload.

Flags:
`

func (c *cli) eventsCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return c.dispatch(ctx, "events", eventsUsage, map[string]command{"send": c.eventsSend}, args, stdout, stderr)
}

// payloadFlags are --payload (JSON text, passed on as it is) and
// --payload-file (the same, read from a file).
type payloadFlags struct {
	text, file string
}

// payloadFlag registers --payload and --payload-file.
func payloadFlag(a *runsAction, receiver string) *payloadFlags {
	p := &payloadFlags{}
	a.fs.StringVar(&p.text, "payload", "null", "the payload, as JSON text, which "+receiver+" receive as their output")
	a.fs.StringVar(&p.file, "payload-file", "", `read the payload from this file ("-": the standard input), instead of --payload`)
	return p
}

// parsePayload checks the payload: JSON text, which the engine's JSON
// codec then encodes as it is.
func parsePayload(a *runsAction, p *payloadFlags) (json.RawMessage, int) {
	if p.file == "" {
		if !json.Valid([]byte(p.text)) {
			return nil, a.usageErr("--payload %s is not valid JSON (a string is quoted: '\"text\"')", dag.Quote(p.text))
		}
		return json.RawMessage(p.text), -1
	}
	given := false
	a.fs.Visit(func(f *flag.Flag) { given = given || f.Name == "payload" })
	if given {
		return nil, a.usageErr("give --payload or --payload-file, not both")
	}
	b, err := a.c.readFile("--payload-file", p.file)
	if err != nil {
		return nil, a.usageErr("%v", err)
	}
	b = bytes.TrimSpace(b)
	if !json.Valid(b) {
		return nil, a.usageErr("--payload-file %s does not hold one JSON value", p.file)
	}
	return json.RawMessage(b), -1
}

func (c *cli) eventsSend(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := c.newCommand("events send", eventsSendUsage, stderr)
	tenant := a.fs.String("tenant", "default", "tenant whose runs receive the event")
	key := a.fs.String("key", "", "the event's key, which the waiting steps wait for: 1-255 bytes of UTF-8 without control characters (required)")
	payload := payloadFlag(a, "the waiting steps")
	asJSON := a.fs.Bool("json", false, `print one JSON object: {"delivered": N}`)
	requireDelivery := a.fs.Bool("require-delivery", false, "exit with status 4 when no step was waiting for the event (it is sent all the same)")
	if _, code := a.parse(args, 0); code >= 0 {
		return code
	}
	tenantGiven := false
	a.fs.Visit(func(f *flag.Flag) { tenantGiven = tenantGiven || f.Name == "tenant" })
	switch {
	case *key == "":
		return a.usageErr("--key is required")
	case !dag.ValidEventKey(*key):
		return a.usageErr("--key %s: want 1 to %d bytes of UTF-8 without control characters", dag.Quote(*key), dag.MaxEventKeyLen)
	case !dag.ValidTenant(*tenant):
		return a.usageErr("--tenant %q: want 1 to %d bytes of UTF-8 without control characters", *tenant, dag.MaxTenantLen)
	}
	body, code := parsePayload(a, payload)
	if code >= 0 {
		return code
	}

	op, err := a.open(ctx)
	if err != nil {
		return a.fail(err)
	}
	defer op.close()
	n, err := op.e.SendEvent(ctx, *tenant, *key, body)
	var refused *durabletype.RefusedError
	if err != nil && !errors.As(err, &refused) {
		if errors.Is(err, durabletype.ErrInvalidEvent) || errors.Is(err, durabletype.ErrPayloadTooLarge) {
			fmt.Fprintf(a.stderr, "%s %s: %v\n", c.name, a.fs.Name(), err)
			return exitUsage
		}
		return a.fail(err)
	}
	code = a.reportRefused(refused)
	if n == 0 && refused == nil {
		a.warnUndelivered(*key, *tenant, tenantGiven)
		if *requireDelivery {
			code = exitUndelivered
		}
	}
	if *asJSON {
		if pc := a.printJSON(stdout, durablejson.NewEventSent(n, refused)); pc != 0 {
			return pc
		}
		return code
	}
	fmt.Fprintf(stdout, "event %s of tenant %s: delivered to %s\n", dag.Quote(*key), dag.Quote(*tenant), plural(n, "waiting step"))
	return code
}

// warnUndelivered says on stderr that no step received the event key of
// tenant, and what to check: the tenant first when it was not given.
func (a *runsAction) warnUndelivered(key, tenant string, tenantGiven bool) {
	fmt.Fprintf(a.stderr, "%s %s: warning: no step of tenant %s was waiting for event %s; it is kept for steps that look back (durable.WithLookback)\n",
		a.c.name, a.fs.Name(), dag.Quote(tenant), dag.Quote(key))
	if !tenantGiven {
		fmt.Fprintf(a.stderr, "%s %s: hint: without --tenant the event goes to tenant %s; runs of another tenant never see it: give theirs with --tenant\n",
			a.c.name, a.fs.Name(), dag.Quote(tenant))
		return
	}
	fmt.Fprintf(a.stderr, "%s %s: hint: check the key and the tenant: \"%s runs show RUN_ID\" says what a waiting run's steps wait for\n",
		a.c.name, a.fs.Name(), a.c.name)
}

// reportRefused prints the refusals of a payload, if any, on stderr and
// returns the exit status: exitRefused when some step refused it.
func (a *runsAction) reportRefused(refused *durabletype.RefusedError) int {
	if refused == nil {
		return 0
	}
	for _, rf := range refused.Refusals {
		fmt.Fprintf(a.stderr, "%s %s: run %s step %s refused the payload: %s; it expects %s; the step keeps waiting\n",
			a.c.name, a.fs.Name(), rf.RunID, dag.Quote(rf.Step), rf.Reason, rf.Expected)
	}
	return exitRefused
}

func (c *cli) signalCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := c.newCommand("signal", signalUsage, stderr)
	tenant := a.fs.String("tenant", "", "only a run of this tenant: a run of another one is not found (default: any tenant)")
	payload := payloadFlag(a, "the steps waiting for the signal")
	pos, code := a.parse(args, 2)
	if code >= 0 {
		return code
	}
	if len(pos) < 2 {
		return a.usageErr("a RUN_ID and a signal NAME are required")
	}
	ids, code := a.parseIDs(pos[:1])
	if code >= 0 {
		return code
	}
	id, name := ids[0], pos[1]
	if err := dag.CheckSignal(name); err != nil {
		return a.usageErr("signal NAME %s: want 1 to %d bytes of UTF-8 without control characters", dag.Quote(name), dag.MaxEventKeyLen)
	}
	if *tenant != "" && !dag.ValidTenant(*tenant) {
		return a.usageErr("--tenant %q: want 1 to %d bytes of UTF-8 without control characters", *tenant, dag.MaxTenantLen)
	}
	body, code := parsePayload(a, payload)
	if code >= 0 {
		return code
	}

	op, err := a.open(ctx)
	if err != nil {
		return a.fail(err)
	}
	defer op.close()
	if *tenant != "" {
		err = op.e.Tenant(*tenant).Signal(ctx, id, name, body)
	} else {
		err = op.e.Signal(ctx, id, name, body)
	}
	var refused *durabletype.RefusedError
	switch {
	case errors.Is(err, durabletype.ErrPayloadTooLarge):
		fmt.Fprintf(a.stderr, "%s %s: %v\n", c.name, a.fs.Name(), err)
		return exitUsage
	case err != nil && !errors.As(err, &refused):
		return a.fail(c.explainSignalError(err, id, *tenant, op.schema))
	}
	fmt.Fprintf(stdout, "signal %s sent to run %s\n", dag.Quote(name), id)
	return a.reportRefused(refused)
}

// explainSignalError says why a signal could not be sent to run id.
func (c *cli) explainSignalError(err error, id uuid.UUID, tenant, schema string) error {
	switch {
	case errors.Is(err, durabletype.ErrRunNotFound) && tenant != "":
		return fmt.Errorf("run %s of tenant %s not found in schema %s", id, dag.Quote(tenant), schema)
	case errors.Is(err, durabletype.ErrRunSettled):
		return fmt.Errorf("run %s has already settled: signals go only to runs in flight", id)
	}
	return c.explainRunError(err, id, schema)
}
