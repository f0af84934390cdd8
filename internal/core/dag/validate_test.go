package dag

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/durabletype"
)

var allRules = []Rule{NameRule, VersionRule, TenantRule, WorkerRule, IdempotencyKeyRule, EventKeyRule, SignalRule,
	ScheduleNameRule, FlowKeyRule, ReasonRule}

// TestRuleCheck: each kind refuses NUL, invalid UTF-8, over-long and (but
// free text) empty values with a typed error naming the field, what is
// wrong and the rule.
func TestRuleCheck(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		rule    Rule
		value   string
		problem string // empty: valid
	}{
		{NameRule, "order-processing", ""},
		{NameRule, "a/b:c.d_e", ""},
		{NameRule, "", "is empty"},
		{NameRule, "a\x00b", "holds a NUL byte"},
		{NameRule, "\xff", "is not valid UTF-8"},
		{NameRule, strings.Repeat("a", MaxNameLen+1), "is 129 bytes long"},
		{NameRule, "a@b", `holds '@'`},
		{NameRule, "-a", `starts with '-'`},
		{NameRule, "..", `starts with '.'`},
		{NameRule, "a%b", `holds '%'`},
		{VersionRule, "1.2.3+x", ""},
		{VersionRule, "a/b", `holds '/'`},
		{VersionRule, "\x00", "holds a NUL byte"},
		{TenantRule, "acme ünïcode", ""},
		{TenantRule, "a\tb", "holds the control character U+0009"},
		{TenantRule, strings.Repeat("é", 101), "is 202 bytes long"},
		{EventKeyRule, "", "is empty"},
		{SignalRule, "go", ""},
		{ScheduleNameRule, "\x7f", "holds the control character U+007F"},
		{IdempotencyKeyRule, "k\xffk", "is not valid UTF-8"},
		{ReasonRule, "", ""},
		{ReasonRule, "line one\nline two\ttab", ""},
		{ReasonRule, "a\x00", "holds a NUL byte"},
		{ReasonRule, "\x1b[31m", "holds the control character U+001B"},
		{ReasonRule, strings.Repeat("x", MaxReasonLen+1), "is 1001 bytes long"},
	} {
		err := tt.rule.Check("field", tt.value)
		if tt.problem == "" {
			require.NoError(t, err, "%s %q", tt.rule.Kind(), tt.value)
			continue
		}
		require.ErrorIs(t, err, durabletype.ErrInvalidValue, "%s %q", tt.rule.Kind(), tt.value)
		var ive *durabletype.InvalidValueError
		require.True(t, errors.As(err, &ive))
		require.Equal(t, "field", ive.Field)
		require.Equal(t, tt.rule.Kind(), ive.Kind)
		require.Equal(t, tt.problem, ive.Problem, "%s %q", tt.rule.Kind(), tt.value)
		require.Contains(t, err.Error(), "field ")
		require.Contains(t, err.Error(), ive.Rule)
		require.LessOrEqual(t, len(ive.Value), 100, "a long value is cut in messages")
		if tt.rule.err != nil {
			require.ErrorIs(t, err, tt.rule.err)
		}
	}
}

// FuzzRule: every rule agrees with itself (Check fails exactly when Valid
// does), never lets a NUL or invalid UTF-8 through, and always says what
// is wrong.
func FuzzRule(f *testing.F) {
	for _, s := range []string{"", "a", "a\x00b", "\xff", "..", "%", "a@b", "-x", strings.Repeat("z", 1<<20), "é\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, r := range allRules {
			err := r.Check("f", s)
			if r.Valid(s) {
				if err != nil {
					t.Fatalf("%s %q: valid but %v", r.Kind(), s, err)
				}
				if strings.IndexByte(s, 0) >= 0 || !validUTF8(s) {
					t.Fatalf("%s %q: valid with a NUL or invalid UTF-8", r.Kind(), s)
				}
				continue
			}
			var ive *durabletype.InvalidValueError
			if !errors.As(err, &ive) {
				t.Fatalf("%s %q: invalid but %v", r.Kind(), s, err)
			}
			if ive.Problem == "breaks the rule" {
				t.Fatalf("%s %q: no reason given", r.Kind(), s)
			}
		}
	})
}

func validUTF8(s string) bool { return strings.ToValidUTF8(s, "") == s }
