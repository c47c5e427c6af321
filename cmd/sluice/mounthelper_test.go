package main

import (
	"slices"
	"testing"
)

// TestMountOptions: mount(8)'s options become the kernel's (ro, nodev…)
// or flags of `sluice mount` (access times among them); an unknown one
// is refused.
func TestMountOptions(t *testing.T) {
	for _, c := range []struct {
		opts, atime, nodiratime string
		kernel                  []string
	}{
		{"defaults", "relatime", "false", nil},
		{"ro,noatime", "noatime", "false", []string{"ro"}},
		{"strictatime,nodiratime,nosuid", "strictatime", "true", []string{"nosuid"}},
		{"nodiratime,diratime,norelatime", "strictatime", "false", nil},
		{"noatime,atime,lazytime", "relatime", "false", nil},
	} {
		fs := mountFlags()
		kernel, err := applyMountOptions(fs, c.opts)
		if err != nil {
			t.Fatalf("%s: %v", c.opts, err)
		}
		if got := fs.Lookup("atime").Value.String(); got != c.atime {
			t.Errorf("%s: atime %s, want %s", c.opts, got, c.atime)
		}
		if got := fs.Lookup("nodiratime").Value.String(); got != c.nodiratime {
			t.Errorf("%s: nodiratime %s, want %s", c.opts, got, c.nodiratime)
		}
		if !slices.Equal(kernel, c.kernel) {
			t.Errorf("%s: kernel options %v, want %v", c.opts, kernel, c.kernel)
		}
	}
	if _, err := applyMountOptions(mountFlags(), "sometimes"); err == nil {
		t.Fatal("an unknown option was taken")
	}
}
