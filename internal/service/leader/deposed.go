package leader

import (
	"errors"
	"log/slog"

	"github.com/effectivelabs/durable/durabletype"
)

// Deposed reports whether err says that this engine's leadership ended
// (durabletype.ErrNotLeader: a leader-only write under its term was
// refused, and wrote nothing), and logs it then. The duty that met it
// stops; the store's Elector cancels the leadership's context, which stops
// the others.
func Deposed(log *slog.Logger, err error) bool {
	if !errors.Is(err, durabletype.ErrNotLeader) {
		return false
	}
	log.Warn("durable: a leader's write was refused: another engine leads", slog.Any("error", err))
	return true
}
