package main

import (
	"strings"
	"testing"
)

// TestUnderMount: a path command with no --dir or --meta asks the
// cluster started last only about paths under its mount.
func TestUnderMount(t *testing.T) {
	for _, c := range []struct {
		path string
		ok   bool
	}{
		{"/tmp/m/a/b", true}, {"/tmp/m", true}, {"/tmp/m/", true}, {"/tmp/m/../m/x", true},
		{"/tmp/mx/a", false}, {"/tmp/other/m/a", false}, {"/tmp", false}, {"/tmp/m/../n", false},
	} {
		err := underMount("/tmp/m", "/tmp/state", []string{"/tmp/m/ok", c.path})
		if (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok %v", c.path, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "--dir") {
			t.Errorf("%s: %v does not say what to do", c.path, err)
		}
	}
	if err := underMount("", "/tmp/state", []string{"/anywhere"}); err != nil {
		t.Errorf("a cluster without a mount: %v", err)
	}
}
