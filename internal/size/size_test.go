package size

import (
	"testing"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]int64{
		"4096": 4096, "64K": 64 << 10, "4m": 4 << 20, "2G": 2 << 30, "1T": 1 << 40, "512MiB": 512 << 20,
		"1.5g": 3 << 29, " 8 KB ": 8 << 10, "0": 0, "2P": 2 << 50,
	} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "-1", "abc", "4X", "inf", "NaN", "1e30", "0x10", "9000P", "K"} {
		if v, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted as %d", bad, v)
		}
	}
}

func TestFormat(t *testing.T) {
	for n, want := range map[uint64]string{12: "12 B", 3 << 29: "1.5 GiB", 1 << 10: "1.0 KiB", 1<<64 - 1: "16.0 EiB"} {
		if got := Format(n); got != want {
			t.Errorf("Format(%d) = %q, want %q", n, got, want)
		}
	}
}

// FuzzParse: Parse never panics, never returns a negative size, and what
// Format prints of a parsed size parses again to within its rounding.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"4096", "64K", "1.5G", "inf", "-0", "1e18", "9.2e18", "8E"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Parse(s)
		if err != nil {
			return
		}
		if v < 0 {
			t.Fatalf("Parse(%q) = %d", s, v)
		}
		if v >= 1<<62 {
			return // Format rounds these up to 8.0 EiB, past int64
		}
		back, err := Parse(Format(uint64(v)))
		if err != nil {
			t.Fatalf("Format(%d) = %q does not parse: %v", v, Format(uint64(v)), err)
		}
		if d := float64(back) - float64(v); d > float64(v)/20+1 || -d > float64(v)/20+1 {
			t.Fatalf("Parse(Format(%d)) = %d", v, back)
		}
	})
}
