package cliflag

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRedact(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://app:s3cret@db:5432/prod?sslmode=disable": "postgres://app:xxxxx@db:5432/prod?sslmode=disable",
		"postgresql://app:p%40ss@db/prod":                    "postgresql://app:xxxxx@db/prod",
		"postgres://app@db/prod?password=s3cret&x=1":         "postgres://app@db/prod?password=xxxxx&x=1",
		"postgres://app@db/prod?sslpassword=s3cret":          "postgres://app@db/prod?sslpassword=xxxxx",
		"postgres://app@db/prod":                             "postgres://app@db/prod",
		"postgres://app:s3cret@db:port/prod":                 "postgres://app:xxxxx@db:port/prod",
		"postgres://app:s 3cret@[::1/prod":                   "postgres://app:xxxxx@[::1/prod",
		"host=db password=s3cret user=app":                   "host=db password=xxxxx user=app",
		"host=db password='s3 cr\\'et' user=app":             "host=db password=xxxxx user=app",
		"host=db PASSWORD = s3cret":                          "host=db PASSWORD=xxxxx",
		"":                                                   "",
	} {
		got := Redact(in)
		require.Equal(t, want, got, in)
		require.NotContains(t, got, "3cret", in)
	}
}

func TestRedactor(t *testing.T) {
	t.Parallel()
	var url, token Secret
	require.NoError(t, url.Set("postgres://app:p%40ss-w0rd@db/prod?password=q-w0rd"))
	require.NoError(t, token.Set("tok-123"))
	var r Redactor
	r.WatchURL(&url)
	r.Watch(&token)

	cause := fs.ErrNotExist
	err := fmt.Errorf("dialing postgres://app:p%%40ss-w0rd@db/prod?password=q-w0rd (p@ss-w0rd, q-w0rd) with tok-123: %w", cause)
	got := r.Error(err)
	require.Equal(t, "dialing xxxxx (xxxxx, xxxxx) with xxxxx: file does not exist", got.Error())
	require.ErrorIs(t, got, fs.ErrNotExist)
	require.Nil(t, r.Error(nil))
	plain := errors.New("nothing secret")
	require.Same(t, plain, r.Error(plain))

	var b strings.Builder
	w := r.Writer(&b)
	n, err := w.Write([]byte("token tok-123\n"))
	require.NoError(t, err)
	require.Equal(t, len("token tok-123\n"), n)
	require.Equal(t, "token xxxxx\n", b.String())

	// A URL without a password is no secret: it is shown as it is.
	var open Secret
	require.NoError(t, open.Set("postgres://app@db/prod"))
	var r2 Redactor
	r2.WatchURL(&open)
	require.Equal(t, "at postgres://app@db/prod", r2.String("at postgres://app@db/prod"))
	// Nothing watched, nothing replaced.
	require.Equal(t, "tok-123", (&Redactor{}).String("tok-123"))
}

// TestSecretVarHelp: the help shows where a secret's default comes from
// once, and never the secret. Without Secret, flag.PrintDefaults printed
// the value itself, after "(default $ENV)": the default twice, the
// password in clear.
func TestSecretVarHelp(t *testing.T) { // not parallel: it sets the environment
	t.Setenv("CLIFLAG_TEST_URL", "postgres://app:s3cret@db/prod")
	t.Setenv("CLIFLAG_TEST_TOKEN", "tok-s3cret")
	t.Setenv("CLIFLAG_TEST_UNSET", "")
	fset := flag.NewFlagSet("x", flag.ContinueOnError)
	var url, token, unset Secret
	SecretVar(fset, &url, "database-url", "CLIFLAG_TEST_URL", "PostgreSQL `URL`", Redact)
	SecretVar(fset, &token, "token", "CLIFLAG_TEST_TOKEN", "bearer `token`", Hidden)
	SecretVar(fset, &unset, "other", "CLIFLAG_TEST_UNSET", "another `secret`", Hidden)
	var b strings.Builder
	fset.SetOutput(&b)
	fset.PrintDefaults()
	help := b.String()
	require.NotContains(t, help, "s3cret")
	require.Contains(t, help, "  -database-url URL\n    \tPostgreSQL URL (default $CLIFLAG_TEST_URL: postgres://app:xxxxx@db/prod)\n")
	require.Contains(t, help, "  -token token\n    \tbearer token (default $CLIFLAG_TEST_TOKEN: set, hidden)\n")
	require.Contains(t, help, "  -other secret\n    \tanother secret (default $CLIFLAG_TEST_UNSET)\n")
	require.Equal(t, 3, strings.Count(help, "(default"), help)

	require.Equal(t, "postgres://app:s3cret@db/prod", url.Value(), "the default is the variable")
	require.NoError(t, fset.Parse([]string{"--token", "given"}))
	require.Equal(t, "given", token.Value())
	require.Empty(t, token.String(), "String never shows the secret")
	require.Empty(t, (*Secret)(nil).Value())
}
