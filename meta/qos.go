package meta

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/sluice-hpc/sluice/api"
	"syscall"
	"time"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire"
	"github.com/sluice-hpc/sluice/meta/engine"
	"github.com/sluice-hpc/sluice/policy/qos"
)

// QoS rules (docs/qos.md): the cluster's ordered list of policy/qos rules,
// kept under one 'Q' key with a version raised by every change. Every
// forwarding daemon and data server holds a watch open (api.QoSWatch
// with the version it runs), answered as soon as the rules change, so a
// change is in force everywhere within a round trip. Heartbeat replies
// carry the version too (api.RegisterRep): a daemon whose watch failed
// asks for the rules (api.QoSList) within a heartbeat.

// QoSRules is the rule list and its version.
type QoSRules = qos.RuleSet

// QoSWatchFor bounds how long a watch is held open with nothing to say.
var QoSWatchFor = 20 * time.Second

const qRules = 'r' // second byte of the 'Q' key holding QoSRules (JSON)

var qosKey = []byte{pPool, qRules}

// QoS returns the rules in force.
func (s *Service) QoS() (QoSRules, error) {
	s.qosMu.Lock()
	defer s.qosMu.Unlock()
	return s.qosLocked()
}

// qosLocked reads the rules. Caller holds qosMu.
func (s *Service) qosLocked() (QoSRules, error) {
	var r QoSRules
	v, err := s.e.Get(qosKey)
	if err != nil {
		return r, nil // none yet
	}
	if err := json.Unmarshal(v, &r); err != nil {
		return r, fmt.Errorf("QoS rules: %w", err)
	}
	return r, nil
}

// QoSVersion is the version of the rules in force (0: never any).
func (s *Service) QoSVersion() uint64 { return s.qosVersion.Load() }

func (s *Service) changeQoS(f func(*QoSRules) error) (QoSRules, error) {
	s.qosMu.Lock()
	defer s.qosMu.Unlock()
	r, err := s.qosLocked()
	if err != nil {
		return r, err
	}
	if err := f(&r); err != nil {
		return r, err
	}
	r.Version++
	b, err := json.Marshal(r)
	if err != nil {
		return r, err
	}
	var batch engine.Batch
	batch.Set(qosKey, b)
	if err := s.e.Apply(&batch, true); err != nil {
		return r, err
	}
	s.qosVersion.Store(r.Version)
	close(s.qosChanged)
	s.qosChanged = make(chan struct{})
	return r, nil
}

// WatchQoS returns the rules in force once they are not version have, or
// after wait.
func (s *Service) WatchQoS(have uint64, wait time.Duration) (QoSRules, error) {
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		s.qosMu.Lock()
		ch := s.qosChanged
		r, err := s.qosLocked()
		s.qosMu.Unlock()
		if err != nil || r.Version != have {
			return r, err
		}
		select {
		case <-ch:
		case <-t.C:
			return r, nil
		}
	}
}

// AddQoS puts rule r in force: in place of the rule of its name, else in
// front of rule before, else last.
func (s *Service) AddQoS(r qos.Rule, before string) (QoSRules, error) {
	// the rule as the syntax reads it (checks it, whoever sent it)
	r2, err := qos.ParseRule(r.Name, r.Words())
	if err != nil {
		return QoSRules{}, errno(syscall.EINVAL, "%v", err)
	}
	return s.changeQoS(func(q *QoSRules) error {
		for i := range q.Rules {
			if q.Rules[i].Name == r2.Name {
				q.Rules[i] = r2
				return nil
			}
		}
		at := len(q.Rules)
		if before != "" {
			at = -1
			for i := range q.Rules {
				if q.Rules[i].Name == before {
					at = i
				}
			}
			if at < 0 {
				return errno(syscall.ENOENT, "no QoS rule %q to put %s in front of", before, r2.Name)
			}
		}
		q.Rules = append(q.Rules[:at], append([]qos.Rule{r2}, q.Rules[at:]...)...)
		return nil
	})
}

// RemoveQoS takes rule name out of force.
func (s *Service) RemoveQoS(name string) (QoSRules, error) {
	return s.changeQoS(func(q *QoSRules) error {
		for i := range q.Rules {
			if q.Rules[i].Name == name {
				q.Rules = append(q.Rules[:i], q.Rules[i+1:]...)
				return nil
			}
		}
		return errno(syscall.ENOENT, "no QoS rule %q", name)
	})
}

// serveQoS adds the QoS rules' operations to t; each answers with the
// rules in force after it.
func (s *Service) serveQoS(t *rpc.Table) {
	rules := func(r QoSRules, err error) (*QoSRules, error) {
		if err != nil {
			return nil, err
		}
		return &r, nil
	}
	serveOp(s, t, api.QoSAdd, func(_ context.Context, q *api.QoSAddReq) (*QoSRules, error) {
		return rules(s.AddQoS(q.Rule, q.Before))
	})
	serveOp(s, t, api.QoSRemove, func(_ context.Context, q *api.RuleRef) (*QoSRules, error) {
		return rules(s.RemoveQoS(q.Name))
	})
	serveOp(s, t, api.QoSList, func(context.Context, *wire.Empty) (*QoSRules, error) { return rules(s.QoS()) })
	serveOp(s, t, api.QoSWatch, func(_ context.Context, q *api.QoSWatchReq) (*QoSRules, error) {
		return rules(s.WatchQoS(q.Have, QoSWatchFor))
	})
}
