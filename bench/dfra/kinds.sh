# shellcheck shell=bash
# The workload generator's behaviours at the DFRA experiments' sizes
# (sourced by pairwise.sh and scarce.sh): args KIND → sluice workload
# flags, scaled by SCALE.
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
