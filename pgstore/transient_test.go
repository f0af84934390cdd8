package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestTransient(t *testing.T) {
	t.Parallel()
	pg := func(code string) error { return fmt.Errorf("pgstore: parent outputs: %w", &pgconn.PgError{Code: code}) }
	for name, c := range map[string]struct {
		err  error
		want bool
	}{
		"server shutting down (terminated backend)": {pg("57P01"), true},
		"server starting up":                        {pg("57P03"), true},
		"connection failure":                        {pg("08006"), true},
		"deadlock":                                  {pg("40P01"), true},
		"connection lost mid-read":                  {fmt.Errorf("pgstore: claim: %w", io.ErrUnexpectedEOF), true},
		"connect refused":                           {&pgconn.ConnectError{}, true},
		"unique violation":                          {pg("23505"), false},
		"syntax error":                              {pg("42601"), false},
		"undecodable shape":                         {fmt.Errorf("pgstore: shape: %w", &json.SyntaxError{}), false},
		"context canceled":                          {context.Canceled, false},
		"other":                                     {errors.New("boom"), false},
	} {
		if got := transient(c.err); got != c.want {
			t.Errorf("%s: transient(%v) = %v, want %v", name, c.err, got, c.want)
		}
	}
}
