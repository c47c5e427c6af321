package data

import (
	"context"
	"errors"
	"github.com/sluice-hpc/sluice/api"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/sluice-hpc/sluice/internal/rpc"
)

// Memory borrowing (ONFS): a mem-tier server's budget can shrink while the
// node's own job needs the memory (OpBudget, `sluice tier budget`). The
// server then reports the smaller capacity; placement sends it no new
// chunks and the tiering manager moves files off it until its usage fits.
// Release gives the configured budget back. The lent budget is kept in
// STATE/budget, so a restart does not take the memory back from the job.

func (s *Server) budgetFile() string {
	if s.cfg.StateDir == "" {
		return ""
	}
	return filepath.Join(s.cfg.StateDir, "budget")
}

// loadBudget applies a budget lent before a restart.
func (s *Server) loadBudget() error {
	p := s.budgetFile()
	if p == "" {
		return nil
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 {
		return rpc.Errorf(syscall.EINVAL, "%s: bad budget %q", p, b)
	}
	if n < s.cfg.Capacity {
		s.store.SetCapacity(n)
	}
	return nil
}

// setBudget answers api.Budget.
func (s *Server) setBudget(_ context.Context, q *api.BudgetReq) (*api.BudgetRep, error) {
	if s.cfg.Capacity <= 0 {
		return nil, rpc.Errorf(syscall.EINVAL, "the %s tier's data server has no budget to lend", s.cfg.Kind)
	}
	budget := s.cfg.Capacity
	if !q.Release {
		if q.Size == 0 || q.Size > uint64(s.cfg.Capacity) {
			return nil, rpc.Errorf(syscall.EINVAL, "budget %d bytes: want more than 0 and at most the configured %d", q.Size, s.cfg.Capacity)
		}
		budget = int64(q.Size)
	}
	if p := s.budgetFile(); p != "" {
		var err error
		if budget == s.cfg.Capacity {
			if err = os.Remove(p); errors.Is(err, os.ErrNotExist) {
				err = nil
			}
		} else {
			err = writeFile(p, strconv.FormatInt(budget, 10))
		}
		if err != nil {
			return nil, err
		}
	}
	s.store.SetCapacity(budget)
	c, u := s.store.Usage()
	s.cfg.Log.Info("budget changed", "budget", budget, "configured", s.cfg.Capacity, "used", u)
	return &api.BudgetRep{Capacity: uint64(c), Used: uint64(u)}, nil
}
