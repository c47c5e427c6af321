package burstbuf

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestJobStages runs a job's stages on a plain directory standing in for
// the mount, with a migrator that records what it was asked.
func TestJobStages(t *testing.T) {
	mnt := t.TempDir()
	outside := t.TempDir()
	os.MkdirAll(filepath.Join(mnt, "in"), 0o755)
	os.WriteFile(filepath.Join(mnt, "in", "mesh"), []byte("mesh"), 0o644)
	os.WriteFile(filepath.Join(outside, "params"), []byte("params"), 0o644)
	script := "#!/bin/sh\n" +
		"#BB_LUA capacity=1G pool=mem\n" +
		"#BB_LUA stage_in source=" + mnt + "/in/mesh destination=mesh\n" +
		"#BB_LUA stage_in source=" + mnt + "/in/mesh\n" +
		"#BB_LUA stage_in source=" + outside + "/params destination=params\n" +
		"#BB_LUA stage_out source=out/result destination=" + mnt + "/results/run1/result\n" +
		"#BB_LUA stage_out source=log destination=" + outside + "/copied/log\n"
	sp, err := Parse(script, "")
	if err != nil {
		t.Fatal(err)
	}
	j := Job{ID: "42", Mount: mnt, Spec: sp, UID: os.Getuid(), GID: os.Getgid()}
	var moves []string
	migrate := func(_ context.Context, p, tier string) error {
		moves = append(moves, tier+" "+p)
		return nil
	}
	if err := j.Setup(); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(j.Dir()); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("buffer directory: %v %v", st, err)
	}
	if err := j.StageIn(context.Background(), migrate); err != nil {
		t.Fatal(err)
	}
	if strings.Join(moves, ",") != "mem "+mnt+"/in/mesh,mem "+mnt+"/in/mesh" {
		t.Fatalf("stage-in moves: %v", moves)
	}
	for name, want := range map[string]string{"mesh": "mesh", "params": "params"} {
		if b, err := os.ReadFile(filepath.Join(j.Dir(), name)); err != nil || string(b) != want {
			t.Fatalf("staged-in %s: %q %v", name, b, err)
		}
	}
	if !strings.Contains(j.Env(), "SLUICE_BB="+j.Dir()+"\n") {
		t.Fatalf("env: %q", j.Env())
	}
	os.MkdirAll(filepath.Join(j.Dir(), "out"), 0o755)
	os.WriteFile(filepath.Join(j.Dir(), "out", "result"), []byte("result"), 0o644)
	os.WriteFile(filepath.Join(j.Dir(), "log"), []byte("log"), 0o644)
	moves = nil
	if err := j.StageOut(context.Background(), migrate); err != nil {
		t.Fatal(err)
	}
	if len(moves) != 1 || moves[0] != "pfs "+mnt+"/results/run1/result" {
		t.Fatalf("stage-out moves: %v", moves)
	}
	if b, _ := os.ReadFile(filepath.Join(mnt, "results", "run1", "result")); string(b) != "result" {
		t.Fatal("stage-out did not rename the result to its destination")
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "copied", "log")); string(b) != "log" {
		t.Fatal("stage-out did not copy the log out")
	}
	if err := j.Teardown(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(j.Dir()); !os.IsNotExist(err) {
		t.Fatalf("buffer directory after teardown: %v", err)
	}
	// a missing input fails stage-in, naming it
	j.Spec.StageIn = []Stage{{Source: mnt + "/in/missing"}}
	err = j.StageIn(context.Background(), func(_ context.Context, p, _ string) error {
		_, err := os.Stat(p)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("stage-in of a missing file: %v", err)
	}
	if err := (Job{ID: "../x", Mount: mnt}).Setup(); err == nil {
		t.Fatal("a job id with a path in it was set up")
	}
}

func TestCheckpointPath(t *testing.T) {
	for _, c := range []struct{ glob, want, err string }{
		{"", "", ""},
		{"ckpt.*", "/.bb/42/ckpt.*", ""},
		{"/mnt/sluice/ckpt/app/v*", "/ckpt/app/v*", ""},
		{"/elsewhere/v*", "", "outside sluice"},
	} {
		j := Job{ID: "42", Mount: "/mnt/sluice", Spec: Spec{Checkpoint: c.glob}}
		got, err := j.CheckpointPath()
		if got != c.want || (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%q: %q %v, want %q %q", c.glob, got, err, c.want, c.err)
		}
	}
}

// TestStageOutCopyKeepsOldOnFailure: a stage-out copy that fails half-way
// leaves the destination's earlier version whole and no temporary file
// beside it.
func TestStageOutCopyKeepsOldOnFailure(t *testing.T) {
	mnt, outside := t.TempDir(), t.TempDir()
	dst := filepath.Join(outside, "result")
	os.WriteFile(dst, []byte("run 1's result"), 0o644)
	j := Job{ID: "7", Mount: mnt, UID: os.Getuid(), GID: os.Getgid(),
		Spec: Spec{StageOut: []Stage{{Source: "result", Destination: dst}}}}
	if err := j.Setup(); err != nil {
		t.Fatal(err)
	}
	// a source that opens but cannot be read: a directory
	if err := os.Mkdir(filepath.Join(j.Dir(), "result"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := j.StageOut(context.Background(), nil); err == nil {
		t.Fatal("staging out an unreadable source succeeded")
	}
	if b, _ := os.ReadFile(dst); string(b) != "run 1's result" {
		t.Fatalf("destination after a failed copy: %q, want the earlier version", b)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 1 {
		t.Fatalf("%d entries beside the destination, want it alone", len(ents))
	}
	// and a good copy replaces it, with the job's owner and mode 0644
	os.Remove(filepath.Join(j.Dir(), "result"))
	os.WriteFile(filepath.Join(j.Dir(), "result"), []byte("run 2"), 0o600)
	if err := j.StageOut(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(dst)
	if b, _ := os.ReadFile(dst); string(b) != "run 2" || err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("destination %q mode %v (%v), want run 2's at 0644", b, st.Mode(), err)
	}
}
