package burstbuf

import (
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	script := `#!/bin/bash
#SBATCH -N 1
#BB_LUA capacity=64M pool=mem access=private app=lammps
#BB_LUA checkpoint=ckpt-* period=30m
#BB_LUA stage_in source=/mnt/sluice/in/a.dat destination=a.dat
#BB_LUA stage_out source=out/result.dat \
#BB_LUA   destination=/mnt/sluice/out/result.dat
#BB_LUAX capacity=1G
# a comment
srun app
#BB_LUA stage_in source=/ignored/after/the/first/command
`
	sp, err := Parse(script, "")
	if err != nil {
		t.Fatal(err)
	}
	if sp.Pool != "mem" || sp.Capacity != 64<<20 || sp.Access != "private" || sp.App != "lammps" || sp.Checkpoint != "ckpt-*" || sp.Period != 30*time.Minute {
		t.Fatalf("settings: %+v", sp)
	}
	if len(sp.StageIn) != 1 || sp.StageIn[0] != (Stage{"/mnt/sluice/in/a.dat", "a.dat"}) {
		t.Fatalf("stage_in: %+v", sp.StageIn)
	}
	if len(sp.StageOut) != 1 || sp.StageOut[0] != (Stage{"out/result.dat", "/mnt/sluice/out/result.dat"}) {
		t.Fatalf("stage_out (a continued line): %+v", sp.StageOut)
	}
	if sp, err := Parse("#BB_LUA checkpoint=/sluice/ckpt/app1/ckpt.* mtbf=90m\n", ""); err != nil ||
		sp.Checkpoint != "/sluice/ckpt/app1/ckpt.*" || sp.MTBF != 90*time.Minute {
		t.Fatalf("an absolute checkpoint glob and an MTBF: %+v %v", sp, err)
	}
	if sp, err := Parse("#!/bin/sh\n#BB_LUA capacity=1G pool=ssd\n", ""); err != nil || sp.Access != "striped" {
		t.Fatalf("default access: %+v %v", sp, err)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, c := range []struct{ line, want string }{
		{"capacity=0 pool=mem", "capacity"},
		{"capacity=lots pool=mem", "capacity"},
		{"capacity=1G", "needs pool"},
		{"access=shared", "access"},
		{"stage_in source=relative/path", "absolute"},
		{"stage_in source=/a/../b", "absolute"},
		{"stage_in source=/a destination=../escape", "destination"},
		{"stage_out source=/abs destination=/x", "stage_out source"},
		{"stage_out source=x destination=rel", "absolute"},
		{"stage_out source=x/../../y destination=/x", "stage_out source"},
		{"frobnicate x=1", "unknown directive"},
		{"capacity=1G pool=mem colour=red", "unknown setting"},
		{"pool=mem pool=ssd", "twice"},
		{"checkpoint=a/b", "checkpoint"},
		{"checkpoint=/a/*/b", "checkpoint"},
		{"checkpoint=/a/", "checkpoint"},
		{"checkpoint=/a/../b/c*", "checkpoint"},
		{"mtbf=0s", "mtbf"},
		{"period=-1h", "period"},
		{"period=often", "period"},
		{"stage_in stage_out", "two words"},
	} {
		_, err := Parse("#BB_LUA "+c.line+"\n", "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error about %q", c.line, err, c.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add("#!/bin/sh\n#BB_LUA capacity=1G pool=mem\n#BB_LUA stage_in source=/a destination=b\n")
	f.Add("#BB_LUA stage_out source=a \\\n#BB_LUA destination=/b\n")
	f.Add("#BB_LUA\n#BB_LUA =\n#BB_LUA a=b=c")
	f.Fuzz(func(t *testing.T, script string) {
		sp, err := Parse(script, "")
		if err != nil {
			return
		}
		// whatever parses stays inside what the stages may touch
		for _, st := range sp.StageIn {
			if !absClean(st.Source) || st.Destination != "" && !nameIn(st.Destination) {
				t.Fatalf("stage_in %+v accepted", st)
			}
		}
		for _, st := range sp.StageOut {
			if !nameIn(st.Source) || !absClean(st.Destination) {
				t.Fatalf("stage_out %+v accepted", st)
			}
		}
		if sp.Capacity < 0 || sp.Capacity > 0 && sp.Pool == "" {
			t.Fatalf("capacity %d pool %q accepted", sp.Capacity, sp.Pool)
		}
	})
}
