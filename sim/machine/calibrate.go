package machine

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
)

// DFRAKinds maps the behaviours of the DFRA pairwise experiment
// (bench/dfra/pairwise.sh, workload kinds) to interference classes.
var DFRAKinds = map[string]string{"nn": "bw", "n1": "n1", "11": "single", "meta": "meta", "iops": "iops"}

// PairsFromDFRA reads the raw results of the DFRA pairwise experiment
// (bench/dfra/pairwise.jsonl: one line per run, the row job's kind, the
// kind it ran with, "" alone, and its slowest rank's time) and returns the
// slowdown pairs of its fixed-mapping runs (two jobs on one forwarding
// node), over the classes of DFRAKinds: our own calibration of the
// interference, beside the DFRA slides'.
func PairsFromDFRA(r io.Reader) (map[string][2]float64, error) {
	return PairsFromDFRAAs(r, DFRAKinds)
}

// PairsFromDFRAAs is PairsFromDFRA with the kinds mapped to classes by
// classOf (kinds it does not name are left out).
func PairsFromDFRAAs(r io.Reader, classOf map[string]string) (map[string][2]float64, error) {
	type row struct {
		Mode, Kind, With string
		Run              struct{ Slowest float64 }
	}
	alone := map[string]float64{}
	with := map[[2]string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		var x row
		if err := json.Unmarshal(sc.Bytes(), &x); err != nil {
			return nil, fmt.Errorf("pairwise line %d: %w", n, err)
		}
		if x.Mode != "ffm" || x.Run.Slowest <= 0 || classOf[x.Kind] == "" || x.With != "" && classOf[x.With] == "" {
			continue
		}
		if x.With == "" {
			alone[x.Kind] = x.Run.Slowest
		} else {
			with[[2]string{x.Kind, x.With}] = x.Run.Slowest
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	out := map[string][2]float64{}
	for k, t := range with {
		a, b := k[0], k[1]
		tb, ok := with[[2]string{b, a}]
		if !ok || alone[a] <= 0 || alone[b] <= 0 {
			continue
		}
		ca, cb := classOf[a], classOf[b]
		if _, done := out[cb+"/"+ca]; done && ca != cb {
			continue
		}
		out[ca+"/"+cb] = [2]float64{t / alone[a], tb / alone[b]}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no fixed-mapping pair with both jobs measured alone")
	}
	return out, nil
}
