package durablecli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/effectivelabs/durable/internal/core/dag"
)

// flagCase is a command line that gives s as the value of flag, whose
// kind has rule.
type flagCase struct {
	rule dag.Rule
	flag string
	args []string
	// emptyOK: the empty value means none (no filter, no step, no key).
	emptyOK bool
	// other: a valid value may be refused for another reason (an unknown
	// workflow, the same version twice), with status 2 too.
	other bool
}

// flagCases are the command lines that give s to a flag or an argument
// that takes a name or a text. The database cannot be reached: a value
// is checked before connecting, and a valid one fails to connect (1).
func flagCases(s string) []flagCase {
	db := []string{"--database-url", "postgres://nobody@127.0.0.1:1/none"}
	id := "01890a5d-ac96-774b-bcce-b302099a8057"
	c := func(rule dag.Rule, flag string, emptyOK, other bool, args ...string) flagCase {
		return flagCase{rule: rule, flag: flag, args: append(args, db...), emptyOK: emptyOK, other: other}
	}
	return []flagCase{
		c(dag.NameRule, "--workflow", true, false, "runs", "list", "--workflow", s),
		c(dag.VersionRule, "--version", true, false, "runs", "list", "--version", s),
		c(dag.TenantRule, "--tenant", true, false, "runs", "list", "--tenant", s),
		c(dag.TenantRule, "--tenant", true, false, "runs", "cancel", "--tenant", s),
		c(dag.ReasonRule, "--reason", true, false, "runs", "cancel", id, "--reason", s),
		c(dag.NameRule, "--from-step", true, false, "runs", "replay", id, "--from-step", s),
		c(dag.NameRule, "--workflow", false, false, "runs", "upgrade", "--workflow", s, "--from", "1", "--to", "2"),
		c(dag.VersionRule, "--to", false, true, "runs", "upgrade", "--workflow", "w", "--from", "1", "--to", s),
		c(dag.NameRule, "--workflow", true, false, "workflows", "--workflow", s),
		c(dag.TenantRule, "--tenant", true, false, "stats", "--tenant", s),
		c(dag.NameRule, "--workflow", false, true, "trigger", "--workflow", s),
		c(dag.TenantRule, "--tenant", false, false, "trigger", "--workflow", "bench-noop", "--tenant", s),
		c(dag.IdempotencyKeyRule, "--idempotency-key", true, false, "trigger", "--workflow", "bench-noop", "--idempotency-key", s),
		c(dag.TenantRule, "--tenant", true, false, "schedules", "list", "--tenant", s),
		c(dag.ScheduleNameRule, "NAME", false, false, "schedules", "pause", "--tenant", "t", "--", s),
		c(dag.TenantRule, "--tenant", false, false, "schedules", "delete", "--tenant", s, "daily"),
		c(dag.ScheduleNameRule, "NAME", false, false, "schedules", "create", "--workflow", "bench-noop", "--cron", "@hourly", "--", s),
		c(dag.EventKeyRule, "--key", false, false, "events", "send", "--key", s),
		c(dag.TenantRule, "--tenant", false, false, "events", "send", "--key", "k", "--tenant", s),
		c(dag.SignalRule, "NAME", false, false, "signal", id, "--", s),
	}
}

// checkFlagValue runs every command line of flagCases(s) in process: a
// value that breaks the rule of its kind exits 2 naming the flag, before
// any connection; a valid one is not refused as such; none panics.
func checkFlagValue(t *testing.T, s string) {
	for _, fc := range flagCases(s) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		var stdout, stderr bytes.Buffer
		code := run(ctx, fc.args, &stdout, &stderr)
		cancel()
		if fc.emptyOK && s == "" {
			continue
		}
		refused := strings.Contains(stderr.String(), fc.flag+" "+dag.Quote(s)+" ")
		switch valid := fc.rule.Valid(s); {
		case !valid && (code != exitUsage || !strings.Contains(stderr.String(), fc.flag)):
			t.Fatalf("%.200q: %.40q breaks the rule of %s but exit %d: %.500s", fc.args, s, fc.rule.Kind(), code, stderr.String())
		case valid && refused:
			t.Fatalf("%.200q: %.40q is a valid %s but was refused: %.500s", fc.args, s, fc.rule.Kind(), stderr.String())
		case valid && code == exitUsage && !fc.other:
			t.Fatalf("%.200q: %.40q is a valid %s but exit 2: %.500s", fc.args, s, fc.rule.Kind(), stderr.String())
		}
	}
}

// FuzzFlagValues: whatever a flag or an argument that takes a name or a
// text is given, the command exits 2 with a message naming the flag when
// the value breaks the rule of its kind, never panics, and never refuses
// a valid one as invalid.
func FuzzFlagValues(f *testing.F) {
	for _, s := range []string{"", "a\x00b", "\x00", "\xff", "..", ".", "%", "a/b", "a@b", "-x", "--", "-h", "1", "2",
		"bench-noop", "é", "a\tb", "a\nb", " ", strings.Repeat("n", 129), strings.Repeat("x", 1<<20)} {
		f.Add(s)
	}
	f.Fuzz(checkFlagValue)
}
