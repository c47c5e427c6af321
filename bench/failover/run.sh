#!/usr/bin/env bash
# Failover of the metadata service (docs/metadata.md, "Failover of the
# metadata service"; docs/benchmarks.md): a local cluster on a
# three-member etcd with one metadata daemon standing by (`sluice cluster
# up --engine etcd --meta-standbys 1`). Writers (WRITERS, 4) make, fsync, stat,
# rename, list and remove 4 KiB files all along (bench/failover/writer.py,
# one JSON line per operation: its kind, start, time and error if any). Each trial kills
# the active metadata daemon with kill -9 (or stops it with SIGSTOP past
# its lease, KILL=stop; or cuts its host off the network, KILL=cut, on a
# cluster of emulated hosts: UP=--hosts) and times how long until the mount's statfs,
# which always reaches the service, answers; the killed daemon is then
# restarted and stands by for the next trial. At the end every file
# whose create and fsync were acknowledged is read back (under its new
# name if the rename was acknowledged, gone if its unlink was), and the
# summary lists every operation in flight from each kill until the
# service answered again.
#
#   bash bench/failover/run.sh                # 5 trials, ~2 min
#   TRIALS=3 KILL=stop bash bench/failover/run.sh
#   KILL=cut UP=--hosts bash bench/failover/run.sh   # hosts: meta-0…2 (etcd and meta), storage, fwd-0/1, compute-0
#
# Results: one JSON line per trial in OUT (bench/results/failover.jsonl)
# and a summary line (the writer's operations around each trial).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
TRIALS=${TRIALS:-5} KILL=${KILL:-kill} OUT=${OUT:-bench/results/failover.jsonl}
BIN=$(bench_sluice)
WORK=$(mktemp -d /tmp/sluice-failover.XXXXXX)
trap '"$BIN" cluster down --dir "$WORK/s" --purge >/dev/null 2>&1; rm -rf "$WORK"' EXIT
# shellcheck disable=SC2086
"$BIN" cluster up --dir "$WORK/s" --mount "$WORK/m" --engine etcd --meta-standbys 1 --mem 1G --ssd 0 --pfs none \
	--timeout 30s ${UP:-} >/dev/null
# daemon FIELD NAME: a field of daemon NAME in cluster.json (Pid, Host)
daemon() { python3 -c 'import json,sys; print([d.get(sys.argv[2],"") for d in json.load(open(sys.argv[1]))["Daemons"] if d["Name"]==sys.argv[3]][0])' "$WORK/s/cluster.json" "$1" "$2"; }
active() { # the metadata daemon that runs and whose address accepts connections
	python3 - "$WORK/s/cluster.json" <<'PY'
import json, socket, sys
c = json.load(open(sys.argv[1]))
for d in c["Daemons"]:
    if d["Name"].startswith("meta"):
        try:
            if open("/proc/%d/stat" % d["Pid"]).read().rsplit(")", 1)[1].split()[0] == "T":
                continue  # stopped: its kernel still accepts connections
        except OSError:
            continue
        a = d["Args"][d["Args"].index("--listen") + 1]
        h, p = a.rsplit(":", 1)
        try:
            socket.create_connection((h, int(p)), timeout=1).close()
            print(d["Name"])
            break
        except OSError:
            pass
PY
}
# WRITERS writers at once, each in a directory of its own
WRITERS=${WRITERS:-4} pids=() check=()
for w in $(seq "$WRITERS"); do
	mkdir -p "$WORK/m/w$w"
	python3 bench/failover/writer.py "$WORK/m/w$w" >"$WORK/ops$w.jsonl" &
	pids+=($!) check+=("$WORK/m/w$w" "$WORK/ops$w.jsonl")
done
sleep 2
: >"$WORK/trials.jsonl"
for t in $(seq "$TRIALS"); do
	name=$(active)
	[ -n "$name" ] || { echo "no active metadata daemon" >&2; exit 1; }
	p=$(daemon Pid "$name")
	t0=$(date +%s.%N)
	case $KILL in
	stop) kill -STOP "$p" ;;
	cut) "$BIN" cluster cut --dir "$WORK/s" "$(daemon Host "$name")" ;;
	*) kill -9 "$p" ;;
	esac
	python3 -c '
import os, sys, time
t0 = float(sys.argv[2])
while True:
    try:
        os.statvfs(sys.argv[1])
        break
    except OSError:
        if time.time() - t0 > 120:
            sys.exit("no metadata server answered within 120 s")
        time.sleep(0.02)
print("%.3f" % (time.time() - t0))' "$WORK/m" "$t0" >"$WORK/took"
	took=$(cat "$WORK/took")
	now=$(active)
	echo "{\"trial\": $t, \"kill\": \"$KILL\", \"killed\": \"$name\", \"active_after\": \"$now\", \"takeover_s\": $took, \"at\": $t0}" | tee -a "$WORK/trials.jsonl"
	if [ "$KILL" = stop ]; then kill -CONT "$p"; sleep 2; fi
	if [ "$KILL" = cut ]; then
		# back on the network, it finds its term over and exits (fenced)
		"$BIN" cluster reconnect --dir "$WORK/s" "$(daemon Host "$name")"
		for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -0 "$p" 2>/dev/null && { echo "$name still runs 10 s after its host was reconnected" >&2; exit 1; }
	fi
	"$BIN" cluster restart --dir "$WORK/s" "$name" >/dev/null
	sleep 3
done
kill "${pids[@]}"
wait "${pids[@]}" 2>/dev/null || true
python3 bench/failover/writer.py --check "$WORK/trials.jsonl" "${check[@]}" | tee "$WORK/summary.json"
cat "$WORK/trials.jsonl" "$WORK/summary.json" >"$WORK/out.jsonl"
bench_stamp "$WORK/out.jsonl"
mkdir -p "$(dirname "$OUT")"
cat "$WORK/out.jsonl" >>"$OUT"
