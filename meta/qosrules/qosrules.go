// Package qosrules keeps the cluster's QoS rules (docs/qos.md): the
// ordered list of policy/qos rules every forwarding daemon and data
// server enforces, with a version every change raises, in the metadata
// daemon's engine. It answers the administration service's QoS
// operations (api.QoSAdd, QoSRemove, QoSList, QoSWatch). It owns only its
// key in the engine; it must not touch the namespace or decide anything
// (policy/qos does, in each daemon).
//
// Every forwarding daemon and data server holds a watch open (api.QoSWatch
// with the version it runs), answered as soon as the rules change, so a
// change is in force everywhere within a round trip. Heartbeat replies
// carry the version too (api.RegisterRep): a daemon whose watch failed
// asks for the rules (api.QoSList) within a heartbeat.
package qosrules

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/api"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/meta/engine"
	"github.com/sluice-hpc/sluice/policy/qos"
)

// WatchFor bounds how long a watch is held open with nothing to say.
var WatchFor = 20 * time.Second

// Key is the engine key of the rules (JSON); the metadata daemon's key
// schema (meta/schema.go) reserves it.
var Key = []byte{'Q', 'r'}

// Rules is the cluster's QoS rules.
type Rules struct {
	e engine.Engine
	// mu orders changes and guards changed, closed (and replaced) by
	// each change to wake watchers
	mu      sync.Mutex
	changed chan struct{}
	// version is the rules' version, read by every heartbeat without mu
	version atomic.Uint64
}

// Open returns the rules kept in e.
func Open(e engine.Engine) (*Rules, error) {
	r := &Rules{e: e, changed: make(chan struct{})}
	rs, err := r.List()
	if err != nil {
		return nil, err
	}
	r.version.Store(rs.Version)
	return r, nil
}

// List returns the rules in force.
func (r *Rules) List() (qos.RuleSet, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.readLocked()
}

// readLocked reads the rules. Caller holds mu.
func (r *Rules) readLocked() (qos.RuleSet, error) {
	var rs qos.RuleSet
	v, err := r.e.Get(Key)
	if err != nil {
		return rs, nil // none yet
	}
	if err := json.Unmarshal(v, &rs); err != nil {
		return rs, fmt.Errorf("QoS rules: %w", err)
	}
	return rs, nil
}

// Version is the version of the rules in force (0: never any).
func (r *Rules) Version() uint64 { return r.version.Load() }

func (r *Rules) change(f func(*qos.RuleSet) error) (qos.RuleSet, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rs, err := r.readLocked()
	if err != nil {
		return rs, err
	}
	if err := f(&rs); err != nil {
		return rs, err
	}
	rs.Version++
	b, err := json.Marshal(rs)
	if err != nil {
		return rs, err
	}
	var batch engine.Batch
	batch.Set(Key, b)
	if err := r.e.Apply(&batch, true); err != nil {
		return rs, err
	}
	r.version.Store(rs.Version)
	close(r.changed)
	r.changed = make(chan struct{})
	return rs, nil
}

// Watch returns the rules in force once their version is not have, or
// after wait.
func (r *Rules) Watch(have uint64, wait time.Duration) (qos.RuleSet, error) {
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		r.mu.Lock()
		ch := r.changed
		rs, err := r.readLocked()
		r.mu.Unlock()
		if err != nil || rs.Version != have {
			return rs, err
		}
		select {
		case <-ch:
		case <-t.C:
			return rs, nil
		}
	}
}

// Add puts rule x in force: in place of the rule of its name, else in
// front of rule before, else last.
func (r *Rules) Add(x qos.Rule, before string) (qos.RuleSet, error) {
	// the rule as the syntax reads it (checks it, whoever sent it)
	x2, err := qos.ParseRule(x.Name, x.Words())
	if err != nil {
		return qos.RuleSet{}, rpc.Errorf(syscall.EINVAL, "%v", err)
	}
	return r.change(func(rs *qos.RuleSet) error {
		for i := range rs.Rules {
			if rs.Rules[i].Name == x2.Name {
				rs.Rules[i] = x2
				return nil
			}
		}
		at := len(rs.Rules)
		if before != "" {
			at = -1
			for i := range rs.Rules {
				if rs.Rules[i].Name == before {
					at = i
				}
			}
			if at < 0 {
				return rpc.Errorf(syscall.ENOENT, "no QoS rule %q to put %s in front of", before, x2.Name)
			}
		}
		rs.Rules = append(rs.Rules[:at], append([]qos.Rule{x2}, rs.Rules[at:]...)...)
		return nil
	})
}

// Remove takes rule name out of force.
func (r *Rules) Remove(name string) (qos.RuleSet, error) {
	return r.change(func(rs *qos.RuleSet) error {
		for i := range rs.Rules {
			if rs.Rules[i].Name == name {
				rs.Rules = append(rs.Rules[:i], rs.Rules[i+1:]...)
				return nil
			}
		}
		return rpc.Errorf(syscall.ENOENT, "no QoS rule %q", name)
	})
}

// Serve adds the QoS rules' operations to t; each answers with the rules
// in force after it.
func (r *Rules) Serve(t *rpc.Table) {
	rules := func(rs qos.RuleSet, err error) (*qos.RuleSet, error) {
		if err != nil {
			return nil, err
		}
		return &rs, nil
	}
	rpc.On(t, api.QoSAdd, func(_ context.Context, q *api.QoSAddReq) (*qos.RuleSet, error) {
		return rules(r.Add(q.Rule, q.Before))
	})
	rpc.On(t, api.QoSRemove, func(_ context.Context, q *api.RuleRef) (*qos.RuleSet, error) {
		return rules(r.Remove(q.Name))
	})
	rpc.On(t, api.QoSList, func(context.Context, *wire.Empty) (*qos.RuleSet, error) { return rules(r.List()) })
	rpc.On(t, api.QoSWatch, func(_ context.Context, q *api.QoSWatchReq) (*qos.RuleSet, error) {
		return rules(r.Watch(q.Have, WatchFor))
	})
}
