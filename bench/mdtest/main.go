// Command mdtest measures metadata rates through a mount: it creates, stats
// and unlinks N empty files in a directory and prints one line of rates.
// Run several at once in different directories to measure scaling.
//
//	mdtest -n 20000 DIR
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	n := flag.Int("n", 20000, "files")
	phases := flag.String("phases", "create,stat,unlink", "phases to run, in this order")
	flag.Parse()
	run := map[string]bool{}
	for _, p := range strings.Split(*phases, ",") {
		run[p] = true
	}
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: mdtest [-n N] DIR")
		os.Exit(2)
	}
	dir := flag.Arg(0)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "mdtest:", err)
		os.Exit(1)
	}
	names := make([]string, *n)
	for i := range names {
		names[i] = filepath.Join(dir, fmt.Sprintf("f%07d", i))
	}
	phase := func(name string, fn func(p string) error) float64 {
		if !run[name] {
			return 0
		}
		start := time.Now()
		for _, p := range names {
			if err := fn(p); err != nil {
				fmt.Fprintf(os.Stderr, "mdtest %s %s: %v\n", name, p, err)
				os.Exit(1)
			}
		}
		return float64(len(names)) / time.Since(start).Seconds()
	}
	c := phase("create", func(p string) error {
		f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		return f.Close()
	})
	s := phase("stat", func(p string) error { _, err := os.Stat(p); return err })
	u := phase("unlink", os.Remove)
	fmt.Printf("create %.0f stat %.0f unlink %.0f\n", c, s, u)
}
