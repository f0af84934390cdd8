// Package cliflag holds the flags that the command lines of durablecli and
// cmd/durable share: the database's (--database-url, --schema) and secrets,
// which help texts, error messages and logs never show.
package cliflag

import (
	"cmp"
	"flag"
	"io"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
)

// Masked replaces a password wherever a secret is shown.
const Masked = "xxxxx"

// Secret is a flag.Value holding a secret, such as a token or a database
// URL with a password. Its String is empty whatever it holds, so that
// flag.PrintDefaults shows no default and the flag package never prints
// the value; SecretVar describes the default in the flag's help instead.
type Secret struct {
	value string
}

// Set implements flag.Value.
func (s *Secret) Set(v string) error {
	s.value = v
	return nil
}

// String implements flag.Value: always empty.
func (s *Secret) String() string { return "" }

// Value returns the secret.
func (s *Secret) Value() string {
	if s == nil {
		return ""
	}
	return s.value
}

// SecretVar defines the flag name holding a secret, whose default is the
// environment variable env. The help says where the default comes from and,
// when the variable is set, shows it through show (which must hide the
// secret), once: "(default $ENV)" or "(default $ENV: <show(value)>)".
func SecretVar(fs *flag.FlagSet, s *Secret, name, env, usage string, show func(string) string) {
	s.value = os.Getenv(env)
	def := " (default $" + env + ")"
	if s.value != "" {
		def = " (default $" + env + ": " + show(s.value) + ")"
	}
	fs.Var(s, name, usage+def)
}

// Hidden is the show function of a secret that is never shown, not even
// in part: "set, hidden".
func Hidden(string) string { return "set, hidden" }

// Redact returns the PostgreSQL connection string s (a postgres:// URL or
// key=value pairs) with its passwords replaced by Masked.
func Redact(s string) string {
	if strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://") {
		u, err := url.Parse(s)
		if err != nil {
			// The boundaries of a URL that does not parse are uncertain:
			// show where it goes, not what it holds.
			return brokenURL.ReplaceAllLiteralString(s, ":"+Masked+"@")
		}
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), Masked)
		}
		q := u.Query()
		changed := false
		for k := range q {
			if passwordKey(k) {
				q[k] = []string{Masked}
				changed = true
			}
		}
		if changed {
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	return kvPassword.ReplaceAllString(s, "${1}="+Masked)
}

var (
	// brokenURL is the user information of a URL that does not parse.
	brokenURL = regexp.MustCompile(`:[^:@/]+@`)
	// kvPassword is a password in key=value pairs, quoted or not.
	kvPassword = regexp.MustCompile(`(?i)\b((?:ssl)?password)\s*=\s*(?:'(?:[^'\\]|\\.)*'|\S+)`)
)

func passwordKey(k string) bool {
	k = strings.ToLower(k)
	return k == "password" || k == "sslpassword"
}

// Passwords returns the passwords in the PostgreSQL connection string s, as
// written and decoded, for Redactor.
func Passwords(s string) []string {
	var out []string
	add := func(p string) {
		if p != "" {
			out = append(out, p)
		}
	}
	if strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://") {
		if u, err := url.Parse(s); err == nil {
			if p, ok := u.User.Password(); ok {
				add(p)
				add(url.PathEscape(p))
				add(url.QueryEscape(p))
			}
			for k, vs := range u.Query() {
				if passwordKey(k) {
					for _, v := range vs {
						add(v)
						add(url.QueryEscape(v))
					}
				}
			}
		} else if m := brokenURL.FindString(s); m != "" {
			add(m[1 : len(m)-1])
		}
		return out
	}
	for _, m := range kvPassword.FindAllString(s, -1) {
		_, v, _ := strings.Cut(m, "=")
		v = strings.TrimSpace(v)
		add(v)
		add(strings.Trim(v, "'"))
	}
	return out
}

// Redactor replaces secrets in text: those of the Secrets it watches, as
// they are when it replaces. Its zero value replaces nothing. Watch before
// the Redactor is used by several goroutines.
type Redactor struct {
	watched []watched
}

type watched struct {
	s   *Secret
	url bool
}

// Watch makes r replace the value of s.
func (r *Redactor) Watch(s *Secret) { r.watched = append(r.watched, watched{s: s}) }

// WatchURL makes r replace the passwords of the connection string in s,
// and the whole string when it holds any.
func (r *Redactor) WatchURL(s *Secret) { r.watched = append(r.watched, watched{s: s, url: true}) }

// secrets returns the values to replace, the longest first, so that a
// secret containing another is replaced whole.
func (r *Redactor) secrets() []string {
	var out []string
	for _, w := range r.watched {
		v := w.s.Value()
		switch {
		case v == "":
		case !w.url:
			out = append(out, v)
		case Redact(v) != v:
			out = append(out, v)
			out = append(out, Passwords(v)...)
		}
	}
	slices.SortStableFunc(out, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	return out
}

// String returns s with every secret replaced by Masked.
func (r *Redactor) String(s string) string {
	for _, sec := range r.secrets() {
		s = strings.ReplaceAll(s, sec, Masked)
	}
	return s
}

// Error returns err with every secret replaced in its message; errors.Is
// and errors.As still see err.
func (r *Redactor) Error(err error) error {
	if err == nil {
		return err
	}
	msg := r.String(err.Error())
	if msg == err.Error() {
		return err
	}
	return &redacted{msg: msg, err: err}
}

type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }

// Writer returns a writer that writes to w with every secret replaced:
// the last guard of stderr, where errors and logs go. A secret split over
// two writes is not found, which is why errors are redacted where they
// arise as well; the writers of the command lines write whole lines.
func (r *Redactor) Writer(w io.Writer) io.Writer { return &redactWriter{r: r, w: w} }

type redactWriter struct {
	r *Redactor
	w io.Writer
}

func (rw *redactWriter) Write(p []byte) (int, error) {
	s := rw.r.String(string(p))
	if _, err := io.WriteString(rw.w, s); err != nil {
		return 0, err
	}
	return len(p), nil
}
