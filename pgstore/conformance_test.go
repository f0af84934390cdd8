package pgstore_test

import (
	"testing"

	"github.com/effectivelabs/durable/internal/pgtest"
	"github.com/effectivelabs/durable/store"
	"github.com/effectivelabs/durable/store/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store { return pgtest.Store(t) })
}
