package sim

// Nodes are a machine's compute nodes as the simulator's scheduler hands
// them out, and as `sluice workload --jobs` hands out the emulated
// compute nodes of a live run of the same jobs: a job takes the nodes it
// names (Job.OnNodes), else the first run of enough consecutive free
// ones, else the lowest-numbered free ones. Not safe for concurrent use.
type Nodes struct {
	free  []bool
	nFree int
}

// NewNodes are n compute nodes, all free.
func NewNodes(n int) *Nodes {
	p := &Nodes{free: make([]bool, n), nFree: n}
	for i := range p.free {
		p.free[i] = true
	}
	return p
}

// Len is how many nodes there are, Free how many are free.
func (p *Nodes) Len() int  { return len(p.free) }
func (p *Nodes) Free() int { return p.nFree }

// Fits says whether job j can start now: its nodes are free (OnNodes),
// or enough nodes are.
func (p *Nodes) Fits(j Job) bool {
	if len(j.OnNodes) == 0 {
		return j.Nodes <= p.nFree
	}
	for _, n := range j.OnNodes {
		if !p.free[n] {
			return false
		}
	}
	return true
}

// Take gives job j its nodes (Fits must have said yes).
func (p *Nodes) Take(j Job) []int {
	if len(j.OnNodes) > 0 {
		return p.take(append([]int(nil), j.OnNodes...))
	}
	n, run := j.Nodes, 0
	for i, f := range p.free {
		if !f {
			run = 0
			continue
		}
		if run++; run == n {
			out := make([]int, n)
			for k := range out {
				out[k] = i - n + 1 + k
			}
			return p.take(out)
		}
	}
	out := make([]int, 0, n)
	for i, f := range p.free {
		if f {
			out = append(out, i)
			if len(out) == n {
				break
			}
		}
	}
	return p.take(out)
}

func (p *Nodes) take(nodes []int) []int {
	for _, i := range nodes {
		p.free[i] = false
	}
	p.nFree -= len(nodes)
	return nodes
}

// Release gives a job's nodes back.
func (p *Nodes) Release(nodes []int) {
	for _, n := range nodes {
		p.free[n] = true
	}
	p.nFree += len(nodes)
}
