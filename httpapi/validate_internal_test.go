package httpapi

import (
	"fmt"
	"net/http"
	"testing"
)

// sqlError is a database error with a SQLSTATE, as pgx's *pgconn.PgError.
type sqlError struct{ code string }

func (e *sqlError) Error() string    { return "database error " + e.code }
func (e *sqlError) SQLState() string { return e.code }

// TestBadTextIsNotA500: a text PostgreSQL refuses (a NUL: 22021, bytes
// invalid in its encoding: 22P05) that a rule would have missed answers
// 400, not 500; other database errors stay 500.
func TestBadTextIsNotA500(t *testing.T) {
	t.Parallel()
	for code, want := range map[string]int{"22021": http.StatusBadRequest, "22P05": http.StatusBadRequest,
		"23505": http.StatusInternalServerError, "08006": http.StatusInternalServerError} {
		p := classify(fmt.Errorf("durable: list runs: %w", &sqlError{code}))
		if p.status != want {
			t.Errorf("SQLSTATE %s: status %d, want %d", code, p.status, want)
		}
		if want == http.StatusBadRequest && p.code != "invalid_text" {
			t.Errorf("SQLSTATE %s: code %q", code, p.code)
		}
	}
}
