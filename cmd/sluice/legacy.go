package main

import (
	"fmt"
	"slices"
	"strings"
)

// The old spellings of the commands (before the CLI was nouns then verbs)
// keep working: legacyArgs rewrites them into the new ones, and main
// prints one line saying so. Scripts and contrib/slurm written against
// them run unchanged.

// moved maps an old top-level command to its new place.
var moved = map[string][]string{
	"up": {"cluster", "up"}, "down": {"cluster", "down"}, "status": {"cluster", "status"},
	"restart": {"cluster", "restart"}, "fault": {"cluster", "fault"},
	"stat": {"file", "stat"}, "migrate": {"file", "migrate"}, "prefetch": {"file", "prefetch"},
	"setstripe": {"file", "stripe"},
	"jobs":      {"job", "activity"},
	"records":   {"monitor", "records"}, "top": {"monitor", "top"},
}

// jobValueFlags are the flags of the old `job` that took a value: what
// follows them is not the job id.
var jobValueFlags = []string{"app", "user", "nodes", "dir", "meta", "secret-file", "config"}

// legacyArgs rewrites an old spelling of a command line into the new one;
// note says what changed ("" when args are in the new spelling).
func legacyArgs(args []string) (out []string, note string) {
	if len(args) == 0 {
		return args, ""
	}
	say := func(old, now string) string {
		return fmt.Sprintf("sluice: %q is now %q; the old spelling will go", "sluice "+old, "sluice "+now)
	}
	if to, ok := moved[args[0]]; ok {
		out = append(append([]string{}, to...), args[1:]...)
		switch args[0] {
		case "up":
			out = legacyZeroCopy(out)
		case "records":
			out = renameFlags(out, map[string]string{"server": "daemon", "from": "start", "to": "end"})
		}
		return out, say(args[0], strings.Join(to, " "))
	}
	switch args[0] {
	case "job":
		// `job [--json] ID` is now `job show ID`
		if w := firstWord(args[1:], jobValueFlags); w != "" && !slices.Contains([]string{"show", "start", "end", "list", "activity", "help"}, w) {
			return append([]string{"job", "show"}, args[1:]...), say("job ID", "job show ID")
		}
	case "sim":
		// `sim --swf LOG …` is now `sim day --swf LOG …`
		if len(args) > 1 && !slices.Contains([]string{"day", "bb", "tiers", "help", "-h", "--help"}, args[1]) {
			return append([]string{"sim", "day"}, args[1:]...), say("sim", "sim day")
		}
	}
	return args, ""
}

// firstWord is the first argument of args that is neither a flag nor the
// value of one of valueFlags given as "--flag value".
func firstWord(args []string, valueFlags []string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			if i+1 < len(args) {
				return args[i+1]
			}
			return ""
		}
		if !strings.HasPrefix(a, "-") {
			return a
		}
		name := strings.TrimLeft(a, "-")
		if !strings.Contains(name, "=") && slices.Contains(valueFlags, name) {
			i++
		}
	}
	return ""
}

// renameFlags renames the flags of args that names maps (old → new).
func renameFlags(args []string, names map[string]string) []string {
	out := slices.Clone(args)
	for i, a := range args {
		if a == "--" {
			break // arguments from here on
		}
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, val, eq := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if n, ok := names[name]; ok {
			out[i] = "--" + n
			if eq {
				out[i] += "=" + val
			}
		}
	}
	return out
}

// legacyZeroCopy rewrites the old `up --zero-copy none|data|fwd|all` into
// the flag's one type, a bool, turning it off in the other kind of daemon
// through --data-flags or --fwd-flags for data and fwd.
func legacyZeroCopy(args []string) []string {
	for i := 0; i < len(args); i++ {
		v, next := "", i
		switch {
		case args[i] == "--zero-copy" || args[i] == "-zero-copy":
			if i+1 >= len(args) {
				return args
			}
			v, next = args[i+1], i+1
		case strings.HasPrefix(args[i], "--zero-copy="):
			v = strings.TrimPrefix(args[i], "--zero-copy=")
		default:
			continue
		}
		var repl []string
		switch v {
		case "none":
			repl = []string{"--zero-copy=false"}
		case "all":
			repl = []string{"--zero-copy=true"}
		case "data":
			repl = []string{"--zero-copy=true", "--fwd-flags=--zero-copy=false"}
		case "fwd":
			repl = []string{"--zero-copy=true", "--data-flags=--zero-copy=false"}
		default:
			continue // a bool already
		}
		return slices.Concat(args[:i], repl, args[next+1:])
	}
	return args
}
