// Package faultpoint holds named pause points that a daemon's code passes
// through (a step of a migration, say) and that a crash test arms at run
// time (OpFault): an armed point stops the next goroutine that reaches it
// until the test releases it, kills the daemon, or a time limit passes.
// Points are one-shot: reaching one disarms it.
//
// It owns only the armed set; it must not know what the points guard.
package faultpoint

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// MaxPause bounds how long an armed point holds a goroutine.
const MaxPause = 5 * time.Minute

// Points is one daemon's set of pause points. The zero value has none
// armed.
type Points struct {
	mu    sync.Mutex       // guards armed
	armed map[string]*gate // until released
}

type gate struct {
	open  chan struct{} // closed on release
	taken bool          // a goroutine is held (or was): later ones pass
}

// Arm makes the next pass through point wait.
func (p *Points) Arm(point string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.armed == nil {
		p.armed = map[string]*gate{}
	}
	if p.armed[point] == nil {
		p.armed[point] = &gate{open: make(chan struct{})}
	}
}

// Release lets a goroutine held at point (or about to be) go on, and
// disarms it.
func (p *Points) Release(point string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if g := p.armed[point]; g != nil {
		close(g.open)
		delete(p.armed, point)
	}
}

// Pass is called where the point is: if armed, it logs and waits until
// released, ctx ends or MaxPause passes.
func (p *Points) Pass(ctx context.Context, log *slog.Logger, point string) {
	p.mu.Lock()
	g := p.armed[point]
	held := g != nil && !g.taken
	if held {
		g.taken = true // one-shot: a second pass goes through
	}
	p.mu.Unlock()
	if !held {
		return
	}
	log.Warn("paused at fault point", "point", point)
	t := time.NewTimer(MaxPause)
	defer t.Stop()
	select {
	case <-g.open:
	case <-ctx.Done():
	case <-t.C:
	}
	log.Warn("fault point released", "point", point)
}
