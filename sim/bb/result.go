package bb

import (
	"math"
	"time"
)

// A burst-buffer run's results and the figures made of them.

// Checkpoint is one checkpoint's fate.
type Checkpoint struct {
	App      string
	Version  int
	Bytes    float64
	At       time.Duration // scheduled
	Done     time.Duration // finished (0: not within the run)
	Bypassed bool
	// Late: it did not finish before the application's next checkpoint
	// was due (within its own period)
	Late bool
}

// Failure is one failure and whether the newest checkpoint it restarts
// from was on the buffer.
type Failure struct {
	App     string
	At      time.Duration
	Version int // 0: none finished yet
	Hit     bool
}

// Result is a burst-buffer run's outcome.
type Result struct {
	Policy      string
	S           float64
	Periods     int
	Admitted    []string // applications granted
	Refused     []string
	AdmittedDWP float64 // data per period the grants declare, bytes
	Checkpoints []Checkpoint
	Failures    []Failure
	// restarts at the end
	RestartHits, Restarts int
	RestartBytes          float64
	RestartSeconds        float64
	// the manager's totals
	Demoted, Evicted, Bypassed float64
	// Spilled is what checkpoints wrote to the PFS because the buffer
	// had no room and nothing to free (Chunk), bytes
	Spilled float64
	// periods: bytes written to the buffer in each
	PeriodWritten []float64
	// MaxUsed is the most the buffer held at once, bytes
	MaxUsed float64
	// Phases and Preempted are the I/O scheduler's: phases begun, and
	// cut short by MaxWait (the data servers report the same)
	Phases, Preempted uint64
	Events            uint64
}

// Summary figures of a run.
func (r *Result) ServedPerPeriod() float64 {
	var b float64
	for _, c := range r.Checkpoints {
		if c.Done > 0 && !c.Late {
			b += c.Bytes
		}
	}
	return b / float64(max(r.Periods, 1)) / r.S
}

// LateShare is the share of checkpoints that did not finish in their period.
func (r *Result) LateShare() float64 {
	n := 0
	for _, c := range r.Checkpoints {
		if c.Late || c.Done == 0 {
			n++
		}
	}
	return float64(n) / float64(max(len(r.Checkpoints), 1))
}

// MeanCheckpoint is the mean time from a checkpoint's schedule to its end,
// seconds (unfinished ones counted to the end of the run).
func (r *Result) MeanCheckpoint(end time.Duration) float64 {
	var s float64
	for _, c := range r.Checkpoints {
		d := c.Done
		if d == 0 {
			d = end
		}
		s += (d - c.At).Seconds()
	}
	return s / float64(max(len(r.Checkpoints), 1))
}

// HitRatio is the share of failures whose checkpoint was on the buffer
// (failures with nothing to restart from are not counted).
func (r *Result) HitRatio() float64 {
	n, h := 0, 0
	for _, f := range r.Failures {
		if f.Version == 0 {
			continue
		}
		n++
		if f.Hit {
			h++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return float64(h) / float64(n)
}
