package tiering

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/sluice-hpc/sluice/api"
)

// Upward pre-migration (ONFS AUPM): a job names the files it will read, in
// order (`sluice file prefetch --job J FILE...`, OpMigrate "prefetch"), and the
// manager promotes them to the mem tier ahead of the reads while keeping
// the mem tier's budget: a window of promoted files not read yet slides
// along the list as the job reads. A promotion starts only while the mem
// tier's free space stays above Cf-m, so pre-migration may take the tier
// into normal out, where the policy moves the coolest closed files (the
// ones the job has read) down, but never into forced out. A file counts as
// read when it is closed after its promotion began. Files in the window are
// pinned: the policy does not move them down before they are read. Two
// files move at a time (prefetchStreams), in the list's order.

// prefetchStreams is how many of a job's files move up at once: in
// order, so the file the job reads first arrives first instead of all of
// them sharing the slow tier's bandwidth and arriving together.
const prefetchStreams = 2

// PrefetchStatus is one job's pre-migration of its inputs.
type PrefetchStatus = api.PrefetchState

type prefetch struct {
	job    string
	files  []uint64
	next   int                  // first file not promoted yet
	window map[uint64]time.Time // promoted or moving, not read: when its promotion began
	bytes  map[uint64]uint64    // their sizes
	moving map[uint64]bool
	st     PrefetchStatus
	cancel context.CancelFunc
}

// Prefetch starts promoting files (in the order given) to the mem tier for
// job, replacing the job's earlier list. It returns at once.
func (m *Manager) Prefetch(job string, files []uint64) {
	ctx, cancel := context.WithCancel(context.Background())
	p := &prefetch{job: job, files: files, window: map[uint64]time.Time{}, bytes: map[uint64]uint64{},
		moving: map[uint64]bool{}, cancel: cancel,
		st: PrefetchStatus{Job: job, Files: len(files), Started: m.cfg.Now()}}
	m.mu.Lock()
	if old := m.prefetches[job]; old != nil {
		old.cancel()
		m.unpinLocked(old)
	}
	m.prefetches[job] = p
	m.mu.Unlock()
	m.logDecision(job, "prefetch", []string{fmt.Sprintf("promote %d input files to the mem tier in reading order, %d at a time, "+
		"while the mem servers keep free space above Cf-m; each stays pinned until read (at most %v)", len(files), prefetchStreams,
		m.cfg.PrefetchHold)})
	go m.runPrefetch(ctx, p)
}

// runPrefetch slides p's window until every file is read or promoted and
// read, or ctx ends (a newer list for the job).
func (m *Manager) runPrefetch(ctx context.Context, p *prefetch) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if m.stepPrefetch(ctx, p) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// stepPrefetch retires read files from the window and promotes more while
// the budget allows; it reports whether the list is done.
func (m *Manager) stepPrefetch(ctx context.Context, p *prefetch) bool {
	m.mu.Lock()
	var inWindow []uint64
	for ino := range p.window {
		inWindow = append(inWindow, ino)
	}
	m.mu.Unlock()
	now := m.cfg.Now()
	for _, ino := range inWindow {
		a, err := m.cfg.NS.Activity(ino)
		m.mu.Lock()
		since := p.window[ino]
		switch {
		case p.moving[ino]:
		case err != nil || a.LastClose > since.UnixNano():
			m.dropLocked(p, ino)
			p.st.Read++
		case now.Sub(since) > m.cfg.PrefetchHold:
			m.dropLocked(p, ino) // never read: unpin it, the policy may move it down
			p.st.Dropped++
		}
		m.mu.Unlock()
	}
	budget := m.prefetchBudget()
	for {
		m.mu.Lock()
		if p.next >= len(p.files) {
			done := len(p.window) == 0
			if done && !p.st.Done {
				p.st.Done, p.st.Finished = true, m.cfg.Now()
			}
			p.st.InWindow = len(p.window)
			m.mu.Unlock()
			return done
		}
		var moving uint64 // promotions not yet in the servers' usage
		for ino := range p.moving {
			moving += p.bytes[ino]
		}
		ino := p.files[p.next]
		inFlight := len(p.moving)
		m.mu.Unlock()
		if inFlight >= prefetchStreams {
			return false
		}
		size, onMem, err := m.fileSize(ino)
		if err != nil || onMem {
			m.mu.Lock()
			p.next++
			if err != nil {
				p.st.Failed++
			}
			m.mu.Unlock()
			continue // gone, or there already
		}
		// the first file goes up even if it alone is over the budget
		if moving+size > budget && len(p.window) > 0 {
			m.mu.Lock()
			p.st.InWindow = len(p.window)
			m.mu.Unlock()
			return false
		}
		m.mu.Lock()
		busy := m.migrating[ino]
		if !busy {
			m.migrating[ino] = true
			p.window[ino] = m.cfg.Now()
			p.bytes[ino] = size
			p.moving[ino] = true
			m.pinned[ino]++
			p.next++
		}
		m.mu.Unlock()
		if busy {
			return false // moving down right now: try again next step
		}
		go func(ino, size uint64) {
			_, err := m.moveFile(ctx, ino, 0, "mem", 0)
			m.mu.Lock()
			delete(m.migrating, ino)
			delete(p.moving, ino)
			if err != nil {
				p.st.Failed++
			} else {
				p.st.Promoted++
				p.st.PromotedBytes += size
			}
			m.mu.Unlock()
			if err != nil {
				m.cfg.Log.Info("prefetch: file not promoted", "job", p.job, "ino", ino, "err", err)
			}
		}(ino, size)
	}
}

// dropLocked takes ino out of p's window and unpins it. Caller holds mu.
func (m *Manager) dropLocked(p *prefetch, ino uint64) {
	delete(p.window, ino)
	delete(p.bytes, ino)
	m.pinned[ino]--
	if m.pinned[ino] <= 0 {
		delete(m.pinned, ino)
	}
}

// unpinLocked empties p's window. Caller holds mu.
func (m *Manager) unpinLocked(p *prefetch) {
	for ino := range p.window {
		m.dropLocked(p, ino)
		p.st.Dropped++
	}
}

// EndPrefetch stops job's pre-migration (the job ended): the files it has
// not read are unpinned.
func (m *Manager) EndPrefetch(job string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.prefetches[job]
	if p == nil || p.st.Done {
		return
	}
	p.cancel()
	m.unpinLocked(p)
	p.next = len(p.files)
	p.st.Done, p.st.Finished = true, m.cfg.Now()
}

// prefetchBudget is the mem tier's free space above Cf-m, summed over its
// live servers.
func (m *Manager) prefetchBudget() uint64 {
	var b uint64
	for _, si := range m.cfg.NS.Servers() {
		if si.Role != "data" || si.Tier != "mem" || !si.Alive || si.Capacity == 0 {
			continue
		}
		d, _ := m.decisionFor(si)
		if free := si.Capacity - min(si.Used, si.Capacity); free > d.Thresholds.ForcedOut {
			b += free - d.Thresholds.ForcedOut
		}
	}
	return b
}

// fileSize returns file ino's size and whether all its chunks are on mem.
func (m *Manager) fileSize(ino uint64) (uint64, bool, error) {
	a, err := m.cfg.NS.Getattr(ino)
	if err != nil {
		return 0, false, err
	}
	locs, err := m.cfg.NS.Layout(ino)
	if err != nil {
		return 0, false, err
	}
	onMem := true
	for _, l := range locs {
		onMem = onMem && l.Tier == "mem"
	}
	return a.Size, onMem && len(locs) > 0, nil
}

// Prefetches returns every job's pre-migration, by job.
func (m *Manager) Prefetches() []PrefetchStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []PrefetchStatus
	for _, p := range m.prefetches {
		st := p.st
		st.InWindow = len(p.window)
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Job < out[j].Job })
	return out
}
