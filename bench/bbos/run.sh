#!/usr/bin/env bash
# The BBOS experiment (docs/experiments/bbos.md): checkpointing
# applications replayed on a burst buffer smaller than what they write
# per period, once per policy, on real daemons with emulated devices:
#   buffer  the mem tier, one data server, S = 128 MiB, 160 MB/s shared by
#           checkpoint writes and demotion reads (equation 1 with m = -1)
#   PFS     the pfs tier at 56 MB/s (the demotion bound)
#   rates   --bb-rates 160,105,1,56: MaxDWPP = 105/(105-56) S = 2.14 S,
#           the paper's (Bw_min/(Bw_min - Br_max) = 3/(3 - 1.6))
# Each run: `sluice workload --gen ckpt-mix` (8 MiB checkpoints, a 6 s
# period, 3 periods, MTBFs drawn up to a bound, seeded by the run number
# so every policy replays the same mix), `sluice bb replay` (grants,
# checkpoints at their times, failures looked up, restarts read after the
# run), one JSON line per run.
#
# Experiments (EXPS, all by default):
#   perf      dedicated at 1.0 and 1.9 S (it admits S at most); maxbw,
#             maxeff, lru, fifo, bbos at 1.3 and 1.9 S, congestion low
#             and high (paper §VI-B, VI-C); and at 2.14 S, MaxDWPP, low
#             congestion (the most a policy can serve: utilisation)
#   bypass    bbos with and without bypass at 1.3, 1.6, 1.9 S (Fig. 7)
#   restart   lru, fifo, bbos at 1.9 and 2.1 S, MTBF up to 20 and 100
#             minutes scaled to the period (Fig. 8)
#   versions  bbos with and without version awareness, periods T, T/2,
#             T/3 at 1:1:1 and 5:2:1, 1.95 S (Fig. 9)
#
#   bash bench/bbos/run.sh                  # 3 runs each, ~80 min
#   EXPS=perf RUNS=1 bash bench/bbos/run.sh
#   EXPS=perf CONGS=high OUT=/tmp/high.jsonl.gz bash bench/bbos/run.sh
#   SMOKE=1 bash bench/bbos/run.sh          # dedicated, maxbw, bbos: 2 short periods
#   # every size and time ×4 (same rates, DWPP and congestion), low
#   # congestion, ~90 min: the simulator's validation on checkpoints of
#   # 0.2-0.4 s (sim TestValidateBurstBufferLarge)
#   EXPS=perf CONGS=low SIZE=32M MEM=512 PERIOD=24 OUT=bench/bbos/results-32m.jsonl.gz bash bench/bbos/run.sh
#   # the same ×4 under high congestion, ~50 min (reported beside it)
#   EXPS=perf CONGS=high SIZE=32M MEM=512 PERIOD=24 OUT=bench/bbos/results-32m-high.jsonl.gz bash bench/bbos/run.sh
#   # the same, each application its own window (below), ~47 min
#   APP_WINDOW=1 EXPS=perf CONGS=high SIZE=32M MEM=512 PERIOD=24 OUT=bench/bbos/results-32m-high-appwindow.jsonl.gz bash bench/bbos/run.sh
#   # the high set once more after the mend (a data server counts queued
#   # chunks' room; stalled writers get room in turn): one run per case,
#   # then runs 2 and 3 (FIRST_RUN: the runs' seeds go on), ~17 and ~32 min
#   APP_WINDOW=1 RUNS=1 EXPS=perf CONGS=high SIZE=32M MEM=512 PERIOD=24 OUT=bench/bbos/results-32m-high-mended.jsonl.gz bash bench/bbos/run.sh
#   APP_WINDOW=1 FIRST_RUN=2 RUNS=2 EXPS=perf CONGS=high SIZE=32M MEM=512 PERIOD=24 OUT=bench/bbos/results-32m-high-mended-2.jsonl.gz bash bench/bbos/run.sh
#   # and under low congestion, ~70 min
#   APP_WINDOW=1 EXPS=perf CONGS=low SIZE=32M MEM=512 PERIOD=24 OUT=bench/bbos/results-32m-low-appwindow.jsonl.gz bash bench/bbos/run.sh
#   # the 8 MiB high set with checkpoints being written counted as room to
#   # come (meta StalledFile) but before a stalled writer kicked the
#   # deleters (the tree of d29d7ed without SetOnStall), ~12 min
#   EXPS=perf CONGS=high OUT=bench/bbos/results-high-stalledfile.jsonl.gz bash bench/bbos/run.sh
#   # the 8 MiB set, each application its own window, ~51 min; then its
#   # BBOS cases again after the manager began to roll the period at a
#   # bypass decision (2026-12-05; the bypass-off runs come along), ~19 min
#   APP_WINDOW=1 OUT=bench/bbos/results-appwindow.jsonl.gz bash bench/bbos/run.sh
#   APP_WINDOW=1 POLICIES=bbos RPOLICIES=bbos DEDICATED=0 OUT=bench/bbos/results-appwindow-roll.jsonl.gz bash bench/bbos/run.sh
#
# TRACE=1: the daemons log at debug level, and each run keeps the buffer's
# I/O scheduler's decisions (a phase's begin and end, an application's
# arrival at its queue) as "Sched" (sim TestValidateBurstBuffer compares
# the turns with the model's), and each checkpoint write's and each
# demotion read's arrival at the buffer's data server and its end as
# "Writes" and "Reads" (since 2026-12-05; from the run's start,
# "Started"; bench/bbos/trace.py sums them up).
#   TRACE=1 EXPS=perf CONGS=high OUT=bench/bbos/results-high-trace.jsonl.gz bash bench/bbos/run.sh
#   # the dedicated buffer's cases under high congestion, ~3 min (its
#   # writes showed a fresh chunk's first write going alone: sim
#   # TestValidateBurstBufferTraced)
#   TRACE=1 APP_WINDOW=1 EXPS=perf CONGS=high POLICIES=" " OUT=bench/bbos/results-dedicated-trace.jsonl.gz bash bench/bbos/run.sh
#   # FIFO's restart cases once each, demotion reading the buffer beside
#   # the writes, ~2 min (bench/bbos/trace.py: the checkpoints' time by the
#   # demotion reads that overlapped them)
#   TRACE=1 APP_WINDOW=1 EXPS=restart RPOLICIES=fifo RUNS=1 OUT=bench/bbos/results-fifo-trace.jsonl.gz bash bench/bbos/run.sh
#
# APP_WINDOW=1: every application writes as from its own compute node.
# All of them write through the one mount of `sluice cluster up`, whose
# write-behind window (32 MiB) is shared: while several jobs wait for
# room each holds an equal part of it (client/vfs), and under high
# congestion 21-30 writers get 1-1.5 MiB each, so the job whose turn it is
# at the buffer's I/O scheduler has one request in flight and the others'
# parts sit at the server waiting for their turns. With APP_WINDOW=1 the
# mount's window is 32 MiB per application of the mix (its equal part is
# then what a mount of its own would give it), recorded as "window".
#
# Raw results: bench/bbos/results.jsonl.gz (OUT); tables: report.py.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
SMOKE=${SMOKE:-0}
RUNS=${RUNS:-3} FIRST_RUN=${FIRST_RUN:-1} EXPS=${EXPS:-perf bypass restart versions}
MEM=${MEM:-128} MEM_MBPS=${MEM_MBPS:-160} PFS_MBPS=${PFS_MBPS:-56} RATES=${RATES:-160,105,1,56}
SIZE=${SIZE:-8M} PERIOD=${PERIOD:-6} PERIODS=${PERIODS:-3}
OUT=${OUT:-bench/bbos/results.jsonl.gz}
POLICIES=${POLICIES:-maxbw maxeff lru fifo bbos}
# the restart experiment's policies; DEDICATED=0 leaves out the dedicated
# buffer's cases of the perf experiment
RPOLICIES=${RPOLICIES:-lru fifo bbos} DEDICATED=${DEDICATED:-1}
if [ "$SMOKE" = 1 ]; then
	RUNS=1 MEM=48 SIZE=4M PERIOD=4 PERIODS=2 EXPS=${SMOKE_EXPS:-perf} POLICIES="maxbw bbos"
fi
BIN=$(bench_sluice)
S=$BIN
WORK=$(mktemp -d /tmp/sluice-bbos.XXXXXX)
cleanup() {
	[ "${KEEP:-0}" = 1 ] && return
	$S cluster down --dir "$WORK/state" --purge >/dev/null 2>&1 || true
	rm -rf "$WORK"
}
trap cleanup EXIT
: > "$WORK/results.jsonl"
# MTBF bounds, scaled from the paper's minutes by period/3800 s
mtbf() { python3 -c "print('%dms' % ($1 * 60 * 1000 * $PERIOD / 3800))"; }
# case EXP POLICY DWPP CONGESTION MTBF-MINUTES CLASSES EXTRA-META-FLAGS LABEL
case_() {
	local exp=$1 policy=$2 dwpp=$3 cong=$4 mtbfmin=$5 classes=$6 extra=$7 label=$8
	for run in $(seq "$FIRST_RUN" $((FIRST_RUN + RUNS - 1))); do
		cls=()
		[ -n "$classes" ] && cls=(--classes "$classes")
		$S workload --gen ckpt-mix --buffer "${MEM}M" --size "$SIZE" --period "${PERIOD}s" --periods "$PERIODS" \
			--dwpp "$dwpp" --congestion "$cong" --mtbf-max "$(mtbf "$mtbfmin")" --seed "$run" "${cls[@]}" > "$WORK/mix.json"
		window=32
		[ "${APP_WINDOW:-0}" = 1 ] && window=$(python3 -c "import json,sys; print(32 * max(1, len(json.load(open(sys.argv[1]))['Apps'])))" "$WORK/mix.json")
		SLUICE_LOG_LEVEL=$([ "${TRACE:-0}" = 1 ] && echo debug || echo info) \
			$S cluster up --dir "$WORK/state" --mount "$WORK/mnt" --mem "${MEM}M" --ssd 0 --fwds 1 \
			--data-max-mbps "$MEM_MBPS" --pfs-max-mbps "$PFS_MBPS" --device-burst 5ms \
			--mount-flags "--write-behind ${window}M" \
			--meta-flags "--bb-policy $policy --bb-rates $RATES --tier-free 1M,2M,4M $extra" >/dev/null
		$S bb replay --dir "$WORK/state" --mount "$WORK/mnt" --mix "$WORK/mix.json" > "$WORK/replay.json"
		python3 - "$exp" "$label" "$run" "$mtbfmin" "$WORK/replay.json" "$window" "$WORK/state/logs/data-mem.log" >> "$WORK/results.jsonl" <<'PY'
import json, re, sys
exp, label, run, mtbf, path, window, log = sys.argv[1:]
r = json.load(open(path))
r["Final"].pop("Versions", None)  # the timeline and totals keep what matters
r.update({"exp": exp, "label": label, "run": int(run), "mtbf_minutes": int(mtbf), "window": int(window) << 20})
# TRACE=1: the buffer's I/O scheduler's decisions, [kind, app, µs from the first]
ev = [(m[1], m[2], int(m[3])) for m in (re.search(r'msg="bb scheduler".* ev=(\w+) app=(\S+) at_us=(\d+)', l) for l in open(log)) if m]
if ev:
    r["Sched"] = [[k, a, t - ev[0][2]] for k, a, t in ev]
# TRACE=1: each checkpoint write at the buffer's server, [app, bytes,
# arrival, end, inode] (µs from the run's start, "Started"; the inode
# since the reads below)
wr = [(m[1], int(m[3]), int(m[4]), int(m[5]), int(m[2])) for m in (re.search(r'msg="bb write".* app=(\S+) ino=(\d+) .* len=(\d+) at_us=(\d+) end_us=(\d+)', l) for l in open(log)) if m]
if wr:
    t0 = r["Started"]
    r["Writes"] = [[a, n, t - t0, e - t0, i] for a, n, t, e, i in wr]
# ... and each demotion read there, [inode, bytes, arrival, end]
rd = [(int(m[1]), int(m[2]), int(m[3]), int(m[4])) for m in (re.search(r'msg="bb read".* ino=(\d+) .* len=(\d+) at_us=(\d+) end_us=(\d+)', l) for l in open(log)) if m]
if rd:
    t0 = r["Started"]
    r["Reads"] = [[i, n, t - t0, e - t0] for i, n, t, e in rd]
print(json.dumps(r))
PY
		tail -n1 "$WORK/results.jsonl" | python3 bench/bbos/report.py --line
		$S cluster down --dir "$WORK/state" --purge >/dev/null
		rm -rf "$WORK/state"
	done
}
for exp in $EXPS; do
	case $exp in
	perf)
		for cong in ${CONGS:-low high}; do
			[ "$DEDICATED" = 1 ] && case_ perf dedicated 1.0 "$cong" 100 "" "" dedicated
			dwpps="1.3 1.9"
			[ "$cong" = low ] && dwpps="1.3 1.9 2.14"
			for dwpp in $dwpps; do
				[ "$SMOKE" = 1 ] && [ "$dwpp" != 1.9 ] && continue
				# dedicated admits S at most: the rest of the mix waits
				[ "$dwpp" = 1.9 ] && [ "$DEDICATED" = 1 ] && case_ perf dedicated "$dwpp" "$cong" 100 "" "" dedicated
				for p in $POLICIES; do
					case_ perf "$p" "$dwpp" "$cong" 100 "" "" "$p"
				done
			done
			[ "$SMOKE" = 1 ] && break
		done
		;;
	bypass)
		for dwpp in 1.3 1.6 1.9; do
			case_ bypass bbos "$dwpp" low 100 "" "" bbos
			case_ bypass bbos "$dwpp" low 100 "" "--bb-bypass=false" bbos-nobypass
		done
		;;
	restart)
		for dwpp in 1.9 2.1; do
			for m in 20 100; do
				for p in $RPOLICIES; do
					case_ restart "$p" "$dwpp" low "$m" "" "" "$p"
				done
			done
		done
		;;
	versions)
		for classes in 1:1,2:1,3:1 1:5,2:2,3:1; do
			case_ versions bbos 1.95 low 100 "$classes" "" "bbos"
			case_ versions bbos 1.95 low 100 "$classes" "--bb-versions=false" "bbos-noversions"
		done
		;;
	*)
		echo "unknown experiment $exp" >&2
		exit 1
		;;
	esac
done
bench_stamp "$WORK/results.jsonl"
gzip -c "$WORK/results.jsonl" > "$OUT"
python3 bench/bbos/report.py "$OUT"
