# shellcheck shell=bash
# The workload generator's behaviours at the DFRA experiments' sizes
# (sourced by pairwise.sh and scarce.sh): args KIND → sluice workload
# flags, scaled by SCALE; fwdfig: a job's traffic through the forwarding layer.
args() {
	case $1 in
	nn | n1 | 11) echo "--ranks 2 --size $((12 * SCALE))M" ;;
	ckpt) echo "--ranks 2 --size $((24 * SCALE))M --bursts 3 --period 1s" ;;
	read) echo "--ranks 2 --size $((8 * SCALE))M" ;;
	meta) echo "--ranks 2 --ops $((120 * SCALE))" ;;
	iops) echo "--ranks 1 --ops $((800 * SCALE))" ;;
	log) echo "--ranks 2 --ops $((800 * SCALE))" ;;
	esac
}
# fwdfig SLUICE STATE JOB → {"fwd_bytes": N, "fwd_ops": N, "fwds": [...]}: what the
# job sent through the forwarding layer, from Beacon's records (what
# `sluice sim` replays as the job's I/O: sim/validate_dfra_test.go)
fwdfig() {
	"$1" job show --json --dir "$2" "$3" | python3 -c '
import json, sys
rep = json.load(sys.stdin)
fl = [s for s in rep.get("Servers") or [] if s["Layer"] == 2]
print(json.dumps({"fwd_bytes": sum(s["Bytes"] for s in fl), "fwd_ops": sum(s.get("Ops", 0) for s in fl),
                  "fwds": sorted({s["Server"] for s in fl if s["Bytes"] + s.get("Ops", 0) > 0})}))'
}

