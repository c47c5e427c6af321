package bbos

import (
	"fmt"
	"math"
)

// Grant is one job's claim on a buffer: Size bytes written per I/O phase
// (its checkpoint), one phase every Period seconds (0: unknown, the grant
// is held for the job's lifetime as a dedicated allocation).
type Grant struct {
	Job    string
	Size   float64
	Period float64
}

// Admission is the answer to a grant request.
type Admission struct {
	OK bool
	// Load is what the buffer would carry with the request, Limit what
	// the policy allows (both in bytes): the sum of the grants for
	// Dedicated, the data written per period (DWPP over Period) for the
	// others.
	Load, Limit float64
	// Period is the buffer's planning period (the longest of the grants'
	// periods; 0 if none is known).
	Period float64
	Reason string
}

// Admit decides whether req may be granted beside grants on a buffer of
// capacity s with rates r under policy p (BBOS §III: grants per I/O phase
// over-subscribe the buffer as far as demotion during the phases keeps it
// from overflowing; DataWarp's dedicated grants never exceed it).
//
//   - Dedicated: the sizes sum to at most s.
//   - MaxBW: never demotes while jobs write, only while the buffer is
//     idle; DWPP within MaxBWLimit (the period's idle time demotes what
//     it writes).
//   - MaxEff, LRU, FIFO, BBOS: DWPP stays within MaxDWPP(s, r), the
//     period plan does not overflow, and the period leaves time to demote
//     a full buffer (equation 3).
//
// DWPP over the planning period T (the longest known period) counts each
// grant T/Period times; a grant of unknown period counts once, as a
// lifetime hold.
func Admit(p Policy, s float64, r Rates, grants []Grant, req Grant) (Admission, error) {
	if s <= 0 {
		return Admission{Reason: "the buffer has no capacity"}, nil
	}
	if req.Size <= 0 || req.Period < 0 || math.IsNaN(req.Size) || math.IsNaN(req.Period) {
		return Admission{}, fmt.Errorf("bbos: bad grant request %+v", req)
	}
	var a Admission
	a.Load, a.Period = Load(p, append(grants[:len(grants):len(grants)], req))
	var err error
	if a.Limit, err = Limit(p, s, a.Period, r); err != nil {
		return Admission{}, err
	}
	if a.Load > a.Limit {
		a.Reason = fmt.Sprintf("%s: %.0f bytes per period with this grant, above the %.0f the buffer takes", p, a.Load, a.Limit)
		return a, nil
	}
	if p != Dedicated && p != MaxBW && a.Period > 0 && a.Load > s {
		pl, err := PlanPeriod(p, a.Load, s, r)
		if err != nil {
			return Admission{}, err
		}
		if pl.Pattern == Overflow || !pl.PeriodOK(a.Period, s, r) {
			a.Reason = fmt.Sprintf("%s: a period of %.0f s cannot write %.0f bytes and demote a full buffer", p, a.Period, a.Load)
			return a, nil
		}
	}
	a.OK = true
	return a, nil
}

// MaxBWLimit is the most MaxBW (Harmonia) admits per period of length
// period: it writes at WriteMax and demotes only while the buffer is idle,
// at DemoteMax, so a period takes what it can both write and demote in
// its length, period·WriteMax·DemoteMax/(WriteMax+DemoteMax). That
// assumes the I/O phases spread over the period: crowded phases find the
// buffer full and stop (the paper's Figure 6), which is what MaxBW risks.
// It is capped at MaxDWPP (no policy admits more than demotion at full
// speed from the first write keeps from overflowing) and is s when the
// period or the rates are unknown.
func MaxBWLimit(s, period float64, r Rates) float64 {
	if period <= 0 || r.Validate() != nil {
		return s
	}
	idle := period * r.WriteMax * r.DemoteMax / (r.WriteMax + r.DemoteMax)
	return min(idle, MaxDWPP(s, r))
}

// Limit is the most policy p admits per planning period of length period
// on a buffer of capacity s: s under Dedicated, MaxBWLimit under MaxBW,
// MaxDWPP under the policies that demote while jobs write.
func Limit(p Policy, s, period float64, r Rates) (float64, error) {
	switch p {
	case Dedicated:
		return s, nil
	case MaxBW:
		return MaxBWLimit(s, period, r), nil
	case MaxEff, LRU, FIFO, BBOS:
		if err := r.Validate(); err != nil {
			return 0, fmt.Errorf("%w: %v", ErrRates, err)
		}
		return MaxDWPP(s, r), nil
	}
	return 0, fmt.Errorf("bbos: unknown policy %q", p)
}

// Load is what grants put on a buffer under policy p, and the planning
// period T (the longest of their periods; 0 if none is known): the sum of
// their sizes under Dedicated (held for the jobs' lifetimes), else the data
// written per period T (DWPP), each grant counted T/Period times and one
// of unknown period once.
func Load(p Policy, grants []Grant) (load, period float64) {
	for _, g := range grants {
		period = max(period, g.Period)
	}
	for _, g := range grants {
		switch {
		case p == Dedicated || g.Period == 0 || period == 0:
			load += g.Size
		default:
			load += g.Size * period / g.Period
		}
	}
	return load, period
}
