// Package burstbuf is the burst buffer as a batch scheduler sees it: the
// directives of a job script (`#BB_LUA` lines for Slurm's burst_buffer/lua
// plugin), the job's buffer directory in the namespace, and the stages of
// its life (setup, stage-in, paths, stage-out, teardown) that
// contrib/slurm/burst_buffer.lua runs through `sluice bb`.
//
// It owns none of the data movement: stage-in promotes files with the
// tiering manager's moves (OpMigrate to the mem tier), stage-out drains
// them to the pfs tier the same way, and admission is the policy's
// (policy/bbos). It must not touch chunk locations or data servers.
package burstbuf

import (
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/sluice-hpc/sluice/internal/size"
)

// DefaultDirective is the directive word of Slurm's lua plugin
// (burst_buffer.conf Directive=).
const DefaultDirective = "BB_LUA"

// Spec is what a job script asks of the burst buffer.
type Spec struct {
	// Pool and Capacity: `capacity=SIZE pool=NAME` (Slurm parses these
	// too, and charges the pool; the pools are sluice's tiers).
	Pool     string
	Capacity int64
	// Access: "striped" (one directory shared by the job's nodes, the
	// default) or "private" (one directory per node).
	Access string
	// App tags the job's I/O in Beacon (`app=NAME`; default: none).
	App string
	// Checkpoint is a glob of the job's checkpoint files
	// (`checkpoint=PATTERN`): names in its buffer directory, or an
	// absolute path in sluice whose last element may hold wildcards (a
	// directory that outlives the job, so that a restart finds the
	// versions). The files are its versions, in the order they were made,
	// for cold-data selection; by default every file of the buffer
	// directory.
	Checkpoint string
	// MTBF is the application's mean time between failures (`mtbf=2h`; 0:
	// the metadata service's default): the burst buffer keeps the newest
	// checkpoints of the applications likely to restart soonest.
	MTBF time.Duration
	// Period is the time between the job's I/O phases (`period=1h`; 0:
	// unknown): with Capacity, its grant per I/O phase (policy/bbos).
	Period   time.Duration
	StageIn  []Stage
	StageOut []Stage
}

// Stage is one stage_in or stage_out line. Stage-in: Source is an
// absolute path in the namespace (its data is promoted to the mem tier in
// place), Destination an optional name in the job's buffer directory
// (a hard link to it). Stage-out: Source is a name in the buffer
// directory, Destination the absolute path it is renamed to and drained
// from to the PFS.
type Stage struct {
	Source, Destination string
}

// Parse reads the directives of script: lines "#" + directive (default
// DefaultDirective) in the script's leading comment block, as Slurm reads
// them, with "\" continuing a line.
func Parse(script, directive string) (Spec, error) {
	if directive == "" {
		directive = DefaultDirective
	}
	var sp Spec
	var lines []string
	cont := false
	for i, l := range strings.Split(script, "\n") {
		l = strings.TrimRight(l, "\r")
		if i == 0 && strings.HasPrefix(l, "#!") {
			continue
		}
		if !strings.HasPrefix(l, "#") {
			if strings.TrimSpace(l) == "" {
				continue
			}
			break // the first command ends the directives, as in Slurm
		}
		rest, ok := strings.CutPrefix(l[1:], directive)
		if !ok || rest != "" && rest[0] != ' ' && rest[0] != '\t' {
			cont = false
			continue
		}
		more := strings.HasSuffix(rest, "\\")
		rest = strings.TrimSuffix(rest, "\\")
		if cont {
			lines[len(lines)-1] += " " + rest
		} else {
			lines = append(lines, rest)
		}
		cont = more
	}
	for _, l := range lines {
		fields := strings.Fields(l)
		if len(fields) == 0 {
			continue
		}
		kv := map[string]string{}
		verb := ""
		for _, f := range fields {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				if verb != "" {
					return sp, fmt.Errorf("%q: two words without '=' (%q, %q)", l, verb, f)
				}
				verb = f
				continue
			}
			if _, dup := kv[k]; dup {
				return sp, fmt.Errorf("%q: %s given twice", l, k)
			}
			kv[k] = v
		}
		if err := sp.apply(verb, kv); err != nil {
			return sp, fmt.Errorf("%q: %w", strings.TrimSpace(l), err)
		}
	}
	return sp, sp.check()
}

func (sp *Spec) apply(verb string, kv map[string]string) error {
	take := func(k string) string {
		v := kv[k]
		delete(kv, k)
		return v
	}
	switch verb {
	case "stage_in", "stage_out":
		st := Stage{Source: take("source"), Destination: take("destination")}
		if verb == "stage_in" {
			sp.StageIn = append(sp.StageIn, st)
		} else {
			sp.StageOut = append(sp.StageOut, st)
		}
	case "":
		for k, v := range kv {
			var err error
			switch k {
			case "capacity":
				if sp.Capacity, err = size.Parse(v); err != nil || sp.Capacity <= 0 {
					return fmt.Errorf("capacity %q: want a size above 0 (like 20G)", v)
				}
			case "period", "mtbf":
				d, err := time.ParseDuration(v)
				if err != nil || d <= 0 {
					return fmt.Errorf("%s %q: want a duration above 0 (like 30m)", k, v)
				}
				*map[string]*time.Duration{"period": &sp.Period, "mtbf": &sp.MTBF}[k] = d
			case "pool", "access", "app", "checkpoint":
				if v == "" {
					return fmt.Errorf("%s= needs a value", k)
				}
				*map[string]*string{"pool": &sp.Pool, "access": &sp.Access, "app": &sp.App, "checkpoint": &sp.Checkpoint}[k] = v
			default:
				return fmt.Errorf("unknown setting %q", k)
			}
		}
		return nil
	default:
		return fmt.Errorf("unknown directive %q (want stage_in, stage_out or key=value settings)", verb)
	}
	for k := range kv {
		return fmt.Errorf("unknown setting %q", k)
	}
	return nil
}

// check validates the whole spec.
func (sp *Spec) check() error {
	if sp.Capacity > 0 && sp.Pool == "" {
		return fmt.Errorf("capacity= needs pool= (a tier: mem or ssd)")
	}
	switch sp.Access {
	case "":
		sp.Access = "striped"
	case "striped", "private":
	default:
		return fmt.Errorf("access=%s: want striped or private", sp.Access)
	}
	if sp.Checkpoint != "" {
		dir, name := path.Split(sp.Checkpoint)
		_, err := path.Match(name, "")
		if err != nil || name == "" || dir != "" && (!absClean(strings.TrimSuffix(dir, "/")) || strings.ContainsAny(dir, "*?[\\")) {
			return fmt.Errorf("checkpoint=%s: want a glob of names in the job's buffer directory, or an absolute path whose last element is one", sp.Checkpoint)
		}
	}
	for _, st := range sp.StageIn {
		if !absClean(st.Source) {
			return fmt.Errorf("stage_in source=%q: want an absolute path", st.Source)
		}
		if st.Destination != "" && !nameIn(st.Destination) {
			return fmt.Errorf("stage_in destination=%q: want a name in the job's buffer directory", st.Destination)
		}
	}
	for _, st := range sp.StageOut {
		if !nameIn(st.Source) {
			return fmt.Errorf("stage_out source=%q: want a path in the job's buffer directory", st.Source)
		}
		if !absClean(st.Destination) {
			return fmt.Errorf("stage_out destination=%q: want an absolute path", st.Destination)
		}
	}
	return nil
}

func absClean(p string) bool { return p != "" && path.IsAbs(p) && path.Clean(p) == p && p != "/" }

// nameIn: a relative path that stays inside the directory it is taken in.
func nameIn(p string) bool {
	return p != "" && !path.IsAbs(p) && path.Clean(p) == p && p != "." && p != ".." && !strings.HasPrefix(p, "../")
}
