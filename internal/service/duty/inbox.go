package duty

import (
	"context"
	"log/slog"

	"github.com/effectivelabs/durable/internal/service/leader"
	"github.com/effectivelabs/durable/internal/service/startstop"
	"github.com/effectivelabs/durable/store"
)

// InboxStore is what the Inbox asks of the store.
type InboxStore interface {
	ApplyInbox(ctx context.Context, p *store.ApplyInboxParams) (*store.ApplyInboxResult, error)
}

// inboxBatch is the most messages applied in one store call.
const inboxBatch = 1000

// InboxConfig is what the Inbox is given.
type InboxConfig struct {
	Common
	Store InboxStore
}

// Inbox applies the messages for runs left pending (Store.ApplyInbox) when
// woken (Wake: a notification says some were sent, such as events sent in
// callers' transactions, once they commit). What a process that died left
// behind the store's periodic leader pass finds (pgstore: RescueTasks).
type Inbox struct {
	startstop.Base
	cfg  InboxConfig
	wake wake
}

// NewInbox returns the duty, not started.
func NewInbox(cfg InboxConfig) *Inbox {
	cfg.defaults()
	return &Inbox{cfg: cfg, wake: newWake()}
}

// Wake says messages are pending. It does not block.
func (d *Inbox) Wake() { d.wake.signal() }

// Start starts applying messages when woken.
func (d *Inbox) Start(ctx context.Context) error {
	d.Go(ctx, d.run)
	return nil
}

func (d *Inbox) run(ctx context.Context) {
	for {
		select {
		case <-d.wake:
		case <-ctx.Done():
			return
		}
		for {
			res, err := d.cfg.Store.ApplyInbox(ctx, &store.ApplyInboxParams{Now: d.cfg.Now(), Limit: inboxBatch})
			if err != nil {
				if leader.Deposed(d.cfg.Logger, err) {
					return
				}
				if ctx.Err() == nil {
					d.cfg.Logger.Error("durable: applying pending messages", slog.Any("error", err))
				}
				break
			}
			d.cfg.Settled(ctx, res.Settled)
			if res.Applied < inboxBatch {
				break
			}
		}
	}
}
