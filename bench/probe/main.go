// Command probe measures what a latency-sensitive client sees on a mount:
// for a fixed time it alternates fstat(2) of a file (one GETATTR when the
// mount does not cache attributes) and a 4 KiB pread(2) at a random offset
// of it, one at a time, and prints the count and the 50th
// and 99th percentile latency of each as JSON. bench/pipeline.sh runs it
// with and without a bulk writer on the same forwarding node.
//
//	probe -duration 10s FILE
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"time"
)

type stats struct {
	N        int
	P50, P99 float64 // µs
}

func summarise(d []time.Duration) stats {
	if len(d) == 0 {
		return stats{}
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	us := func(q float64) float64 { return float64(d[int(q*float64(len(d)-1))].Nanoseconds()) / 1e3 }
	return stats{N: len(d), P50: us(0.5), P99: us(0.99)}
}

func main() {
	dur := flag.Duration("duration", 10*time.Second, "how long to probe")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: probe [-duration D] FILE")
		os.Exit(2)
	}
	f, err := os.Open(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() < 4096 {
		fmt.Fprintln(os.Stderr, "probe: want a file of at least 4 KiB")
		os.Exit(1)
	}
	blocks := st.Size() / 4096
	buf := make([]byte, 4096)
	var stat, read []time.Duration
	end := time.Now().Add(*dur)
	for time.Now().Before(end) {
		t := time.Now()
		if _, err := f.Stat(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		stat = append(stat, time.Since(t))
		t = time.Now()
		if _, err := f.ReadAt(buf, rand.Int63n(blocks)*4096); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		read = append(read, time.Since(t))
	}
	json.NewEncoder(os.Stdout).Encode(map[string]stats{"stat": summarise(stat), "read4k": summarise(read)})
}
