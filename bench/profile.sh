#!/usr/bin/env bash
# Where the CPU goes in each process of the data path (docs/benchmarks.md):
# a local cluster with Go profiles on (`sluice cluster up --pprof-base`), fio (or
# bench/mdtest's creates or removals) running one workload for 14 s, and a
# 10 s CPU profile of every daemon taken at once. Prints the workload's
# rate, each daemon's CPU use in cores and its top functions; the profiles
# stay in OUT for `go tool pprof`. `unlink` first makes FILES files (default
# 250,000, in directories of 5,000) and removes them during the profile.
#
#   bash bench/profile.sh [seqread|seqwrite|randread|create|unlink] [UP FLAGS...]   # default seqread
#   bash bench/profile.sh unlink --mount-flags=--writeback-unlinks=false   # one round trip each
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
WL=${1:-seqread}
shift || true
OUT=${OUT:-/tmp/sluice-profile}
BASE=${BASE:-$((20000 + RANDOM % 200 * 10))}
command -v fio >/dev/null || apt-get install -y -qq fio >/dev/null
BIN=$(bench_sluice)
WORK=$(mktemp -d /tmp/sluice-prof.XXXXXX)
trap '"$BIN" cluster down --dir "$WORK/s" --purge >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
rm -rf "$OUT" && mkdir -p "$OUT"
"$BIN" cluster up --dir "$WORK/s" --mount "$WORK/m" --mem 4G --ssd 0 --pfs none --pprof-base "$BASE" "$@" >/dev/null
FIO=(--filename="$WORK/m/f" --direct=1 --iomem_align=4096 --ioengine=psync --output-format=json)
case $WL in
seqread) fio --name=lay "${FIO[@]}" --rw=write --bs=1M --size=2g >/dev/null
	RUN=(--rw=read --bs=1M --size=2g) ;;
seqwrite) RUN=(--rw=write --bs=1M --size=2g) ;;
randread) fio --name=lay "${FIO[@]}" --rw=write --bs=1M --size=256m >/dev/null
	RUN=(--rw=randread --bs=4k --size=256m) ;;
create) bench_tool mdtest >/dev/null ;;
unlink) bench_tool mdtest >/dev/null
	for ((i = 0; i < ${FILES:-250000} / 5000; i++)); do bin/mdtest -n 5000 -phases create "$WORK/m/u$i" >/dev/null; done ;;
*) echo "unknown workload $WL (seqread, seqwrite, randread, create, unlink)" >&2; exit 2 ;;
esac
if [ "$WL" = create ]; then
	# creates (open O_CREAT|O_EXCL, close) of fresh files in one directory
	# per round, for 14 s
	(end=$((SECONDS + 14)); i=0; while [ $SECONDS -lt $end ]; do
		bin/mdtest -n 2000 -phases create "$WORK/m/d$i"; i=$((i + 1)); done) > "$OUT/mdtest.out" &
elif [ "$WL" = unlink ]; then
	# removals of the files made above, one directory per round, for 14 s
	(end=$((SECONDS + 14)); i=0; while [ $SECONDS -lt $end ] && [ -d "$WORK/m/u$i" ]; do
		bin/mdtest -n 5000 -phases unlink "$WORK/m/u$i"; i=$((i + 1)); done
	[ $SECONDS -ge $end ] || echo "ran out of files before the profile ended: set FILES higher") > "$OUT/mdtest.out" &
else
	fio --name=run "${FIO[@]}" "${RUN[@]}" --time_based --runtime=14 > "$OUT/fio.json" &
fi
FIOPID=$!
sleep 2
NAMES=$(python3 -c 'import json,sys; print(" ".join(d["Name"] for d in json.load(open(sys.argv[1]))["Daemons"]))' "$WORK/s/cluster.json")
i=0
for n in $NAMES; do
	curl -s -o "$OUT/$n.pb.gz" "http://127.0.0.1:$((BASE + i))/debug/pprof/profile?seconds=10" &
	i=$((i + 1))
done
wait
wait $FIOPID 2>/dev/null || true
python3 - "$OUT" "$WL" <<'PY'
import json, sys
if sys.argv[2] in ("create", "unlink"):
    rates, rounds = [], 0
    for l in open(sys.argv[1] + "/mdtest.out"):
        f = l.split()
        if sys.argv[2] in f[::2]:  # "create C" or "unlink U"
            rates.append(float(f[f.index(sys.argv[2]) + 1]))
        else:
            print(l.strip())
    size = "2,000" if sys.argv[2] == "create" else "5,000"
    print(f"{sys.argv[2]}s: {sum(rates) / len(rates):.0f}/s over {len(rates)} rounds of {size}")
    sys.exit()
j = json.load(open(sys.argv[1] + "/fio.json"))["jobs"][0]
r, w = j["read"], j["write"]
if sys.argv[2] == "randread":
    print(f"fio {sys.argv[2]}: {r['iops']:.0f} IOPS")
else:
    print(f"fio {sys.argv[2]}: {(r['bw_bytes'] + w['bw_bytes']) / 1e6:.0f} MB/s")
PY
for n in $NAMES; do
	echo "== $n"
	go tool pprof -top -nodecount=8 "$BIN" "$OUT/$n.pb.gz" 2>/dev/null |
		awk '/Total samples/ {for (k = 1; k <= NF; k++) if ($k == "=") {v = $(k + 1); f = (v ~ /ms$/) ? 1000 : 1; sub("m?s$", "", v); printf "CPU: %.2f cores\n", v / f / 10}} /^ *[0-9.]+m?s / {print}'
done
echo "profiles: $OUT (go tool pprof -top $BIN $OUT/NAME.pb.gz)"
