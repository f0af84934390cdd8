package durable

import (
	"context"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/effectivelabs/durable/store"
)

// heartbeatLoop vouches for this engine's claims every HeartbeatInterval,
// and at once when the listener resyncs (rt.heartbeatSig), and cancels the
// steps whose claims the store reports lost, until ctx is done. A heartbeat in flight then is not cancelled (it runs with rt.ctx):
// Stop waits for it.
func (e *Engine) heartbeatLoop(ctx context.Context, rt *runtime) {
	t := time.NewTicker(e.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-rt.heartbeatSig:
		case <-ctx.Done():
			return
		}
		rt.flightMu.Lock()
		refs := make([]store.TaskRef, 0, len(rt.flights))
		for ref := range rt.flights {
			refs = append(refs, ref)
		}
		rt.flightMu.Unlock()
		if len(refs) == 0 {
			continue
		}
		res, err := e.store.Heartbeat(rt.ctx, &store.HeartbeatParams{Now: e.now(), WorkerID: e.cfg.WorkerID, Tasks: refs})
		if err != nil {
			e.log.Warn("durable: heartbeat failed", slog.Any("error", err))
			continue
		}
		e.claimsLost(rt, res)
	}
}

// claimsLost cancels the steps running under lost claims: with
// ErrRunCancelled when their run was cancelled, ErrStepTimeout when their
// attempt timed out, ErrClaimLost otherwise.
func (e *Engine) claimsLost(rt *runtime, res *store.HeartbeatResult) {
	rt.flightMu.Lock()
	defer rt.flightMu.Unlock()
	for _, ref := range res.Cancelled {
		if f := rt.flights[ref]; f != nil {
			f.lose(ErrRunCancelled)
		}
	}
	for _, ref := range res.TimedOut {
		if f := rt.flights[ref]; f != nil {
			f.lose(ErrStepTimeout)
		}
	}
	for _, ref := range res.Lost {
		if f := rt.flights[ref]; f != nil {
			f.lose(ErrClaimLost) // no effect on a step already told its run was cancelled
		}
	}
}

// runCancelled cancels the steps this engine runs for a cancelled run, as
// soon as the store says so (their heartbeats would say it later).
func (e *Engine) runCancelled(rt *runtime, id uuid.UUID) {
	rt.flightMu.Lock()
	defer rt.flightMu.Unlock()
	for ref, f := range rt.flights {
		if ref.RunID == id {
			f.lose(ErrRunCancelled)
		}
	}
}
