package workload

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-hpc/sluice/internal/ident"
)

// Job is a behaviour run as a job: Ranks processes, each the command
// Exe Args with --rank R --start-at T added (it runs rank R of the
// behaviour and prints its Result as JSON, as `sluice workload --rank`
// does), with the job's id in JobVar, its rank in SLURM_PROCID and its
// application tag in SLUICE_APP, as Slurm would start them.
type Job struct {
	ID, App, JobVar string
	Ranks           int
	// Nodes, if any, are emulated compute nodes the ranks are spread
	// over in blocks (each rank's SLURMD_NODENAME).
	Nodes []string
	Exe   string
	Args  []string
}

// Run starts every rank and waits for them: their results, in rank
// order, or the first rank's failure. Every rank begins its I/O at once,
// past the time it takes to start them all (a start barrier, as IOR's
// ranks after MPI_Barrier).
func (j Job) Run() ([]Result, error) {
	rs := make([]Result, j.Ranks)
	errs := make([]error, j.Ranks)
	var wg sync.WaitGroup
	at := strconv.FormatInt(time.Now().Add(300*time.Millisecond+time.Duration(j.Ranks)*30*time.Millisecond).UnixNano(), 10)
	for r := 0; r < j.Ranks; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			rs[r], errs[r] = j.rank(r, at)
		}(r)
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return rs, nil
}

// rank runs rank r, starting its I/O at unix ns at.
func (j Job) rank(r int, at string) (Result, error) {
	c := exec.Command(j.Exe, append(append([]string{}, j.Args...), "--rank", strconv.Itoa(r), "--start-at", at)...)
	c.Env = append(os.Environ(), j.JobVar+"="+j.ID, "SLURM_PROCID="+strconv.Itoa(r), "SLUICE_APP="+j.App)
	if len(j.Nodes) > 0 {
		c.Env = append(c.Env, ident.NodeVar+"="+j.Nodes[r*len(j.Nodes)/j.Ranks])
	}
	var stderr strings.Builder
	c.Stderr = &stderr
	var res Result
	out, err := c.Output()
	if err == nil {
		err = json.Unmarshal(out, &res)
	}
	if err != nil {
		return res, fmt.Errorf("rank %d: %v %s", r, err, strings.TrimSpace(stderr.String()))
	}
	return res, nil
}
