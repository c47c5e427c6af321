// Package size parses and prints byte counts the way operators type and
// read them (4096, 64K, 4M, 2G, 1.5T; powers of 1024). It is used by the
// command line and the cluster launcher; it touches nothing else.
package size

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Parse parses a size like 4096, 64K, 4M, 2G, 1T, 512MiB, "1.5 GiB" or
// 1.5g (binary units; a trailing B or iB is allowed, so what Format prints
// parses back). It refuses negative, non-finite
// and out-of-range values.
func Parse(s string) (int64, error) {
	t := strings.ReplaceAll(strings.ToUpper(s), " ", "")
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		case 'P':
			mult = 1 << 50
		case 'E':
			mult = 1 << 60
		}
		if mult > 1 {
			t = t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) || strings.ContainsAny(t, "XPN_") {
		return 0, fmt.Errorf("invalid size %q (want a number of bytes, optionally with K, M, G, T, P or E)", s)
	}
	b := v * float64(mult)
	if b >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return int64(b), nil
}

// Format prints a byte count with a binary unit ("1.5 GiB", "12 B").
func Format(n uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	f := float64(n)
	i := 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f %s", f, units[i])
}
