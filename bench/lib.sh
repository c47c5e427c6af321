# shellcheck shell=bash
# The benchmark harness (docs/benchmarks.md, "How to read these figures"),
# sourced by the scripts under bench/:
#
#   bench_bin REV        the sluice binary of commit REV, built once per
#                        commit into $BENCH_CACHE (default ~/.cache/sluice-bench);
#                        REV "." is this tree (bin/sluice, built now)
#   bench_sluice         the build a script measures: $SLUICE_BIN when set
#                        (bench/ab.sh sets it per side), else this tree's
#   bench_tool NAME      bench/NAME (a Go helper: mdtest, probe, passthrough,
#                        sim/slowreplay) built into bin/, printed
#   bench_stamp FILE [CONFIG]
#                        every JSON line of FILE (or of stdin to stdout when
#                        FILE is -) without a "commit" gains
#                        "commit" (of $SLUICE_BIN_REV, or this tree when
#                        SLUICE_BIN is unset), "config" (default: $UP) and
#                        "host" (bench_machine)
#   bench_commit REV     REV's full commit hash ("." : HEAD, with "+dirty"
#                        when the tree has changes)
#   bench_machine        this machine as a JSON object: host, cores, memory,
#                        kernel, CPU model
#   bench_tag SIDE REV CONFIG ROUND
#                        a filter: each JSON line of stdin gains "side",
#                        "commit", "config", "ab_round" and "host"
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

# _bench_build OUT PKG: PKG built into OUT by a rename, so that a script
# running OUT beside another that builds it never runs half a file.
_bench_build() {
	mkdir -p "$(dirname "$1")"
	go build -o "$1.$$" "$2" >&2 && mv -f "$1.$$" "$1"
}

bench_bin() {
	local rev=${1:-.}
	if [ "$rev" = . ]; then
		_bench_build bin/sluice ./cmd/sluice || return
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

bench_sluice() {
	if [ -n "${SLUICE_BIN:-}" ]; then
		echo "$SLUICE_BIN"
	else
		bench_bin .
	fi
}

bench_tool() {
	_bench_build "bin/$(basename "$1")" "./bench/$1" || return
	echo "bin/$(basename "$1")"
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
    r.update({"side": side, "commit": commit, "config": config, "ab_round": rnd, "host": machine})
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

_BENCH_STAMP_PY='
import json, os, sys
path, commit, config, machine = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
out = []
for line in (sys.stdin if path == "-" else open(path)):
    s = line.strip()
    try:
        r = json.loads(s) if s.startswith("{") else None
    except ValueError:
        r = None
    if isinstance(r, dict) and "commit" not in r:
        r.update({"commit": commit, "config": config, "host": machine})
        line = json.dumps(r) + "\n"
    if path == "-":
        sys.stdout.write(line)
        sys.stdout.flush()
    else:
        out.append(line)
if path != "-":
    with open(path + ".stamp", "w") as f:
        f.writelines(out)
    os.replace(path + ".stamp", path)
'

bench_stamp() {
	local file=$1 config=${2-${UP:-}} commit
	[ "$file" = - ] || [ -s "$file" ] || return 0
	if [ -n "${SLUICE_BIN_REV:-}" ] || [ -z "${SLUICE_BIN:-}" ]; then
		commit=$(bench_commit "${SLUICE_BIN_REV:-.}")
	else
		commit="unknown: $SLUICE_BIN"
	fi
	python3 -c "$_BENCH_STAMP_PY" "$file" "$commit" "$config" "$(bench_machine)"
}
