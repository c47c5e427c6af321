package main

import (
	"slices"
	"strings"
	"testing"
)

// TestLegacyArgs: every old spelling scripts and contrib/slurm use becomes
// a command of the tree, with its flags and arguments kept.
func TestLegacyArgs(t *testing.T) {
	for _, c := range []struct{ old, now string }{
		{"up --dir D --mount M", "cluster up --dir D --mount M"},
		{"up --zero-copy none --dir D", "cluster up --zero-copy=false --dir D"},
		{"up --zero-copy=all", "cluster up --zero-copy=true"},
		{"up --zero-copy data", "cluster up --zero-copy=true --fwd-flags=--zero-copy=false"},
		{"up --zero-copy=fwd --fwd-flags --workers=1,1,1", "cluster up --zero-copy=true --data-flags=--zero-copy=false --fwd-flags --workers=1,1,1"},
		{"down --purge", "cluster down --purge"},
		{"status --dir D", "cluster status --dir D"},
		{"restart fwd0", "cluster restart fwd0"},
		{"fault --server 3 --slow 10", "cluster fault --server 3 --slow 10"},
		{"stat F", "file stat F"},
		{"migrate --tier ssd F G", "file migrate --tier ssd F G"},
		{"prefetch --job J F", "file prefetch --job J F"},
		{"setstripe --local D", "file stripe --local D"},
		{"jobs", "job activity"},
		{"job 7001", "job show 7001"},
		{"job --json 7001", "job show --json 7001"},
		{"job --dir D 7001", "job show --dir D 7001"},
		{"job --dir start 7001", "job show --dir start 7001"},
		{"job start --app A 7001", "job start --app A 7001"},
		{"job --dir D end 7001", "job --dir D end 7001"},
		{"records --server fwd-1 --from T0 --to=T1 --json", "monitor records --daemon fwd-1 --start T0 --end=T1 --json"},
		{"records -- --from", "monitor records -- --from"},
		{"top --once", "monitor top --once"},
		{"sim --machine tiny --swf L", "sim day --machine tiny --swf L"},
		{"sim bb --runs 1", "sim bb --runs 1"},
		{"sim tiers", "sim tiers"},
		{"sim", "sim"},
		{"bb setup --job J", "bb setup --job J"},
		{"qos ls", "qos ls"},
	} {
		got, note := legacyArgs(strings.Fields(c.old))
		if strings.Join(got, " ") != c.now {
			t.Errorf("%q: got %q, want %q", c.old, strings.Join(got, " "), c.now)
		}
		if (note != "") != (c.old != c.now) {
			t.Errorf("%q: notice %q", c.old, note)
		}
		cmd, _, err := newRoot().Find(got)
		if err != nil || (len(got) > 1 && !strings.HasPrefix(got[1], "-") && cmd.Name() != got[1] && !slices.Contains(cmd.Aliases, got[1])) {
			t.Errorf("%q: %q is no command of the tree (%v, found %s)", c.old, c.now, err, cmd.CommandPath())
		}
	}
}
