# shellcheck shell=bash
# The benchmark harness (docs/benchmarks.md, "How to read these figures"),
# sourced by the scripts under bench/:
#
#   bench_bin REV        the sluice binary of commit REV, built once per
#                        commit into $BENCH_CACHE (default ~/.cache/sluice-bench);
#                        REV "." is this tree (bin/sluice, built now)
#   bench_commit REV     REV's full commit hash ("." : HEAD, with "+dirty"
#                        when the tree has changes)
#   bench_machine        this machine as a JSON object: host, cores, memory,
#                        kernel, CPU model
#   bench_tag SIDE REV CONFIG ROUND
#                        a filter: each JSON line of stdin gains "side",
#                        "commit", "config", "ab_round" and "machine"
#   bench_rotate ROUNDS FN SIDE...
#                        calls `FN SIDE r` for every side and round
#                        r = 1..ROUNDS, the order rotated each round, so that
#                        a drift of the machine falls on every side alike
#
# Clusters a script starts are tied to it: sourcing this exports
# SLUICE_EXIT_WITH=$$ and SLUICE_EXIT_REMOVE=1 (unless set), so `sluice
# cluster up` takes them down and removes their state when the script
# ends, kill -9 included.
export SLUICE_EXIT_WITH=${SLUICE_EXIT_WITH:-$$} SLUICE_EXIT_REMOVE=${SLUICE_EXIT_REMOVE:-1}
BENCH_CACHE=${BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/sluice-bench}

bench_commit() {
	local rev=${1:-.}
	if [ "$rev" = . ]; then
		local c
		c=$(git rev-parse HEAD)
		git diff --quiet HEAD -- . ':!bench/results' 2>/dev/null || c+=+dirty
		echo "$c"
	else
		git rev-parse --verify "$rev^{commit}"
	fi
}

bench_bin() {
	local rev=${1:-.}
	if [ "$rev" = . ]; then
		go build -o bin/sluice ./cmd/sluice >&2
		echo bin/sluice
		return
	fi
	local c out tree
	c=$(bench_commit "$rev")
	out=$BENCH_CACHE/$c/sluice
	if [ ! -x "$out" ]; then
		mkdir -p "$BENCH_CACHE/$c"
		tree=$(mktemp -d /tmp/sluice-bench-tree.XXXXXX)
		git worktree add -q --detach "$tree" "$c" >&2
		(cd "$tree" && go build -o "$out" ./cmd/sluice) >&2
		git worktree remove --force "$tree" >&2
		if ! "$out" cluster --help >/dev/null 2>&1; then
			# a build from before the commands were nouns then verbs: the
			# scripts' spellings are turned back into its own
			mv "$out" "$out.bin"
			bench_oldcli "$out.bin" >"$out"
			chmod +x "$out"
		fi
	fi
	echo "$out"
}

# bench_oldcli BIN: a wrapper that runs BIN, a build from before the
# nouns-then-verbs commands, with today's spellings turned into its own.
bench_oldcli() {
	cat <<WRAP
#!/usr/bin/env bash
bin='$1'
case "\$1 \${2:-}" in
"cluster "*) shift; exec "\$bin" "\$@" ;;
"file stripe") shift 2; exec "\$bin" setstripe "\$@" ;;
"file "*) shift; exec "\$bin" "\$@" ;;
"job activity") shift 2; exec "\$bin" jobs "\$@" ;;
"job show") shift 2; exec "\$bin" job "\$@" ;;
"monitor "*) shift; exec "\$bin" "\$@" ;;
"sim day") shift 2; exec "\$bin" sim "\$@" ;;
esac
exec "\$bin" "\$@"
WRAP
}

bench_machine() {
	python3 - <<'PY'
import json, os, platform
cpu = ""
for line in open("/proc/cpuinfo"):
    if line.startswith("model name"):
        cpu = line.split(":", 1)[1].strip()
        break
mem = 0
for line in open("/proc/meminfo"):
    if line.startswith("MemTotal:"):
        mem = int(line.split()[1]) * 1024
print(json.dumps({"host": platform.node(), "cores": os.cpu_count(), "mem_bytes": mem,
                  "kernel": platform.release(), "cpu": cpu}))
PY
}

bench_tag() {
	local side=$1 rev=$2 config=$3 round=$4
	python3 -c '
import json, sys
side, commit, config, rnd, machine = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), json.loads(sys.argv[5])
for line in sys.stdin:
    line = line.strip()
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    r.update({"side": side, "commit": commit, "config": config, "ab_round": rnd, "machine": machine})
    print(json.dumps(r))
' "$side" "$(bench_commit "$rev")" "$config" "$round" "$(bench_machine)"
}

bench_rotate() {
	local rounds=$1 fn=$2 r i n
	shift 2
	local sides=("$@")
	n=${#sides[@]}
	for ((r = 1; r <= rounds; r++)); do
		for ((i = 0; i < n; i++)); do
			"$fn" "${sides[$(((i + r - 1) % n))]}" "$r"
		done
	done
}
