// Command mdtest measures metadata rates through a mount: it creates, stats,
// reads and unlinks N files in a directory, makes and removes N directories,
// and builds and removes a directory tree, printing one line of rates
// (operations per second, as mdtest reports them). Run several at once in
// different directories to measure scaling.
//
//	mdtest -n 20000 DIR
//	mdtest -n 3000 -bytes 4096 -phases create,read,stat,unlink,mkdir,rmdir DIR
//	mdtest -phases tree-create,tree-remove -depth 3 -branch 10 DIR
//
// Phases (in the order given):
//
//	create       open(O_CREAT|O_EXCL), write -bytes bytes, close
//	stat         stat each file
//	read         open, read the whole file (up to -bytes), close (mdtest's "file read")
//	unlink       unlink each file
//	mkdir        mkdir N directories
//	rmdir        rmdir them
//	tree-create  mkdir every directory of a tree -depth deep with -branch
//	             children per directory (mdtest -z/-b), parents first
//	tree-remove  rmdir them, children first
//
// The output names each phase run and its rate: "create 7383 read 1539 …".
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

func main() {
	n := flag.Int("n", 20000, "files (and directories for mkdir/rmdir)")
	size := flag.Int("bytes", 0, "bytes written into each file at create and read back by read")
	depth := flag.Int("depth", 2, "depth of the tree for tree-create/tree-remove")
	branch := flag.Int("branch", 10, "children of each directory of the tree")
	phases := flag.String("phases", "create,stat,unlink", "phases to run, in this order")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: mdtest [-n N] [-bytes B] [-phases P,...] DIR")
		os.Exit(2)
	}
	dir := flag.Arg(0)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fail("mkdir", dir, err)
	}
	names := make([]string, *n)
	dirs := make([]string, *n)
	for i := range names {
		names[i] = filepath.Join(dir, fmt.Sprintf("f%07d", i))
		dirs[i] = filepath.Join(dir, fmt.Sprintf("d%07d", i))
	}
	tree := treeDirs(filepath.Join(dir, "tree"), *depth, *branch)
	data := bytes.Repeat([]byte{'x'}, *size)
	buf := make([]byte, *size+1)
	ops := map[string]func(p string) error{
		"create": func(p string) error {
			f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			if len(data) > 0 {
				if _, err := f.Write(data); err != nil {
					f.Close()
					return err
				}
			}
			return f.Close()
		},
		"stat": func(p string) error { _, err := os.Stat(p); return err },
		"read": func(p string) error {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			got, err := io.ReadFull(f, buf)
			if err != io.ErrUnexpectedEOF && err != io.EOF {
				f.Close()
				if err == nil {
					err = fmt.Errorf("longer than %d bytes", *size)
				}
				return err
			}
			if got != *size {
				f.Close()
				return fmt.Errorf("read %d bytes, wrote %d", got, *size)
			}
			return f.Close()
		},
		"unlink":      os.Remove,
		"mkdir":       func(p string) error { return os.Mkdir(p, 0o755) },
		"rmdir":       os.Remove,
		"tree-create": func(p string) error { return os.Mkdir(p, 0o755) },
		"tree-remove": os.Remove,
	}
	var out []string
	for _, ph := range strings.Split(*phases, ",") {
		fn, ok := ops[ph]
		if !ok {
			fmt.Fprintf(os.Stderr, "mdtest: unknown phase %q\n", ph)
			os.Exit(2)
		}
		list := names
		switch ph {
		case "mkdir", "rmdir":
			list = dirs
		case "tree-create":
			list = tree
		case "tree-remove":
			list = reversed(tree)
		}
		start := time.Now()
		for _, p := range list {
			if err := fn(p); err != nil {
				fail(ph, p, err)
			}
		}
		out = append(out, fmt.Sprintf("%s %.0f", ph, float64(len(list))/time.Since(start).Seconds()))
	}
	fmt.Println(strings.Join(out, " "))
}

// treeDirs lists the directories of a tree rooted at root, depth levels
// below it with branch children each, parents before their children.
func treeDirs(root string, depth, branch int) []string {
	out := []string{root}
	level := []string{root}
	for d := 0; d < depth; d++ {
		var next []string
		for _, p := range level {
			for b := 0; b < branch; b++ {
				next = append(next, filepath.Join(p, fmt.Sprintf("t%d", b)))
			}
		}
		out = append(out, next...)
		level = next
	}
	return out
}

func reversed(s []string) []string {
	r := make([]string, len(s))
	for i, v := range s {
		r[len(s)-1-i] = v
	}
	return r
}

func fail(phase, p string, err error) {
	fmt.Fprintf(os.Stderr, "mdtest %s %s: %v\n", phase, p, err)
	os.Exit(1)
}
