package pgstore_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/effectivelabs/durable/internal/tools/pgtest"
	"github.com/effectivelabs/durable/store"
	"github.com/effectivelabs/durable/store/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store { return pgtest.Store(t) })
}

func TestConformanceTx(t *testing.T) {
	t.Parallel()
	storetest.RunTx(t, func(t *testing.T) (store.TxFinisher, storetest.TxEffects) {
		s := pgtest.Store(t)
		table := pgx.Identifier{s.Schema(), "effects"}.Sanitize()
		pool := pgtest.Pool(t)
		_, err := pool.Exec(context.Background(), "CREATE TABLE "+table+" (key text NOT NULL)")
		require.NoError(t, err)
		return s, storetest.TxEffects{
			Write: func(ctx context.Context, tx any, key string) error {
				_, err := tx.(pgx.Tx).Exec(ctx, "INSERT INTO "+table+" (key) VALUES ($1)", key)
				return err
			},
			Count: func(t *testing.T, key string) int {
				var n int
				require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table+" WHERE key = $1", key).Scan(&n))
				return n
			},
		}
	})
}
