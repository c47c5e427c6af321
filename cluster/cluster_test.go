package cluster

import "testing"

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "4096": 4096, "64K": 64 << 10, "4M": 4 << 20, "2G": 2 << 30,
		"1.5G": 3 << 29, "1T": 1 << 40, "8GiB": 8 << 30, "512mb": 512 << 20} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "lots", "-1G", "G"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
	if s := FormatSize(3 << 29); s != "1.5 GiB" {
		t.Errorf("FormatSize: %s", s)
	}
	if s := FormatSize(12); s != "12 B" {
		t.Errorf("FormatSize: %s", s)
	}
}
