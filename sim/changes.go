package sim

import (
	"fmt"
	"sort"

	"github.com/sluice-hpc/sluice/sim/engine"
	"github.com/sluice-hpc/sluice/sim/flow"
	"github.com/sluice-hpc/sluice/sim/machine"
)

// scaling is a resource's capacity as described and the factors in
// force on it, by the key of what set them (a change's number, or
// failSlowKey), in key order: the same product in every run.
type scaling struct {
	base    float64
	keys    []int
	factors []float64
}

// failSlowKey is the fail-slow scenario's key among the changes'.
const failSlowKey = -1

// change is a scheduled change with what it names on this machine.
type change struct {
	machine.Change
	fwds, targets []int
}

// prepareChanges expands the machine's and the configuration's changes
// and refuses a set that would take every forwarding node down at once
// (the jobs would have nowhere to send their I/O).
func (s *Sim) prepareChanges() error {
	all := append(append([]machine.Change(nil), s.m.Changes...), s.cfg.Changes...)
	for _, c := range all {
		f, t, err := c.Expand(len(s.fwds), s.m.Storage.Groups, s.m.Storage.Targets)
		if err != nil {
			return fmt.Errorf("sim: %w", err)
		}
		s.changes = append(s.changes, change{c, f, t})
	}
	// at the start of each change that takes something down, the
	// forwarding nodes out of service: down themselves, or their whole
	// storage group down (applyChange's rule)
	G, T := s.m.Storage.Groups, s.m.Storage.Targets
	for _, c := range s.changes {
		if !c.Down() {
			continue
		}
		fwdDown, targetDown := map[int]bool{}, map[int]bool{}
		for _, o := range s.changes {
			if o.Down() && o.At <= c.At && (o.For == 0 || c.At < o.At+o.For) {
				for _, i := range o.fwds {
					fwdDown[i] = true
				}
				for _, t := range o.targets {
					targetDown[t] = true
				}
			}
		}
		out := 0
		for i := range s.fwds {
			groupDown := true
			for t := i % G * T; t < (i%G+1)*T && groupDown; t++ {
				groupDown = targetDown[t]
			}
			if fwdDown[i] || groupDown {
				out++
			}
		}
		if out == len(s.fwds) {
			return fmt.Errorf("sim: the changes take every forwarding node out of service at %s", c.String())
		}
	}
	return nil
}

// scheduleChanges puts every change's start and end on the clock.
func (s *Sim) scheduleChanges() {
	for k := range s.changes {
		c := s.changes[k]
		s.e.At(engine.FromSeconds(c.At), engine.Func(func(now engine.Time) { s.applyChange(k, true, now) }))
		s.changesLeft++
		if c.For > 0 {
			s.e.At(engine.FromSeconds(c.At+c.For), engine.Func(func(now engine.Time) { s.applyChange(k, false, now) }))
			s.changesLeft++
		}
	}
}

// applyChange starts (on) or ends change k: the capacities of what it
// names, which forwarding nodes are alive for policy/dfra, and the
// running jobs moved off the forwarding nodes it took down.
func (s *Sim) applyChange(k int, on bool, now engine.Time) {
	c := s.changes[k]
	s.changesLeft--
	ev := ChangeEvent{At: now.Seconds(), Factor: c.Factor, End: !on, Note: c.Note}
	for _, i := range c.fwds {
		s.scale(s.fwdBW[i], k, c.Factor, on)
		s.scale(s.fwdOps[i], k, c.Factor, on)
		ev.Fwds = append(ev.Fwds, s.fwds[i].ID)
	}
	for _, t := range c.targets {
		s.scale(s.targets[t], k, c.Factor, on)
		ev.Targets = append(ev.Targets, s.targets[t].Name)
	}
	// a forwarding node is in service while it is up and some target of
	// its storage group is (with the whole group down its writes fail:
	// the daemons' health check takes it out)
	died := false
	G, T := s.m.Storage.Groups, s.m.Storage.Targets
	for i := range s.fwds {
		alive := s.fwdBW[i].Capacity() > 0
		if alive {
			g, up := i%G, false
			for t := g * T; t < (g+1)*T && !up; t++ {
				up = s.targets[t].Capacity() > 0
			}
			alive = up
		}
		died = died || s.fwds[i].Alive && !alive
		s.fwds[i].Alive = alive
	}
	if died {
		ev.Remaps = s.remap(now)
	}
	s.res.Changes = append(s.res.Changes, ev)
}

// scale sets r's capacity to what it is described with times the
// factors in force, after the factor under key starts (on) or ends.
func (s *Sim) scale(r *flow.Resource, key int, f float64, on bool) {
	sc := s.scaled[r]
	if sc == nil {
		sc = &scaling{base: r.Capacity()}
		s.scaled[r] = sc
	}
	i := sort.SearchInts(sc.keys, key)
	has := i < len(sc.keys) && sc.keys[i] == key
	switch {
	case on && has:
		sc.factors[i] = f
	case on:
		sc.keys = append(sc.keys[:i], append([]int{key}, sc.keys[i:]...)...)
		sc.factors = append(sc.factors[:i], append([]float64{f}, sc.factors[i:]...)...)
	case has:
		sc.keys = append(sc.keys[:i], sc.keys[i+1:]...)
		sc.factors = append(sc.factors[:i], sc.factors[i+1:]...)
	}
	c := sc.base
	for _, x := range sc.factors {
		c *= x
	}
	s.fm.SetCapacity(r, c)
}

// capacityAlone is r's capacity for a run alone on the machine: its
// present one, or the one it is described with while a change has it
// down (a run alone would never end).
func (s *Sim) capacityAlone(r *flow.Resource) float64 {
	if c := r.Capacity(); c > 0 {
		return c
	}
	if sc := s.scaled[r]; sc != nil {
		return sc.base
	}
	return 0
}
