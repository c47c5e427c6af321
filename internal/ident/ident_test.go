package ident

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	env := []byte("PATH=/bin\x00SLURM_JOB_ID=4711\x00PMI_RANK=3\x00MYJOB=abc\x00")
	if id := Parse(env, ""); id.Job != "4711" || id.Rank != 3 {
		t.Fatalf("%+v", id)
	}
	if id := Parse(env, ""); id.Node != "" {
		t.Fatalf("node without SLURMD_NODENAME: %+v", id)
	}
	if id := Parse(append(env, "SLURMD_NODENAME=cn7\x00"...), ""); id.Node != "cn7" {
		t.Fatalf("node: %+v", id)
	}
	if id := Parse(env, "MYJOB"); id.Job != "abc" {
		t.Fatalf("custom jobid_var: %+v", id)
	}
	if id := Parse([]byte("X=1"), ""); id.Job != "" || id.Rank != -1 {
		t.Fatalf("%+v", id)
	}
}

func TestLookupChild(t *testing.T) {
	cmd := exec.Command("sleep", "5")
	cmd.Env = []string{"SLURM_JOB_ID=77", "OMPI_COMM_WORLD_RANK=5"}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	// right after exec the kernel may briefly show an empty environment
	env := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/environ"
	for i := 0; i < 100; i++ {
		if b, _ := os.ReadFile(env); len(b) > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	var r Resolver
	if id := r.Lookup(uint32(cmd.Process.Pid)); id.Job != "77" || id.Rank != 5 {
		t.Fatalf("%+v", id)
	}
}
