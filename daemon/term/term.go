// Package term runs a daemon's term on a shared engine: a daemon of which
// one instance is active at a time (the metadata service, a manager in a
// process of its own) campaigns through engine.Elector, stands by until it
// wins, and serves with a context that ends with its term. It owns the
// campaign loop and nothing else: what a daemon does with its term is the
// daemon's.
package term

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/sluice-hpc/sluice/meta/engine"
)

// ErrEnded is the cause of a term's context when another instance took
// over (this one's lease in the engine was lost).
var ErrEnded = errors.New("this server's term ended: another is active (its lease in the engine was lost); stopped serving")

// Campaign waits until this instance, named id (the address others reach
// it at), is the active one of el's election, and returns a context that
// ends, with cause ErrEnded, when its term does. what names the role in
// the log ("metadata server"). A campaign that fails (the engine's
// member cut off, a lease that ran out while it waited) is made again: a
// standby that gave up would leave the role with none. It returns ctx
// itself if ctx ends first.
func Campaign(ctx context.Context, el engine.Elector, id, what string, log *slog.Logger) (context.Context, error) {
	if active, err := el.Active(ctx); err == nil && active != "" {
		log.Info("standing by: another "+what+" is active", "active", active)
	}
	ended, err := el.Campaign(ctx, id)
	for err != nil {
		if ctx.Err() != nil {
			return ctx, nil
		}
		log.Warn("campaign for the active "+what+" failed: campaigning again", "err", err)
		select {
		case <-ctx.Done():
			return ctx, nil
		case <-time.After(time.Second):
		}
		ended, err = el.Campaign(ctx, id)
	}
	log.Info("active: this "+what+" now serves", "id", id)
	tctx, cancel := context.WithCancelCause(ctx)
	go func() {
		select {
		case <-ended:
			log.Error(ErrEnded.Error(), "role", what)
			cancel(ErrEnded)
		case <-tctx.Done():
		}
	}()
	return tctx, nil
}
