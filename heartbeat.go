package durable

import (
	"log/slog"
	"time"

	"github.com/effectivelabs/durable/store"
)

// heartbeatLoop vouches for this engine's claims every HeartbeatInterval,
// and cancels the steps whose claims the store reports lost.
func (e *Engine) heartbeatLoop(rt *runtime) {
	defer close(rt.hbDone)
	t := time.NewTicker(e.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-rt.hbStop:
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
		e.claimsLost(rt, res.Lost)
	}
}

// claimsLost cancels the steps running under lost claims.
func (e *Engine) claimsLost(rt *runtime, lost []store.TaskRef) {
	rt.flightMu.Lock()
	defer rt.flightMu.Unlock()
	for _, ref := range lost {
		if f := rt.flights[ref]; f != nil {
			f.cancel(ErrClaimLost)
		}
	}
}
