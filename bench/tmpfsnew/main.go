// Command tmpfsnew measures, with no sluice at all, what a process pays
// to write new files into tmpfs against overwriting them, when the files
// of the round before were removed a while ago (docs/benchmarks.md, "New
// files: pages the host took back"). Each round writes -size of new
// files in 4 MiB files by 1 MiB writes, overwrites them, removes them (or,
// with -keep, moves them aside, as the mem tier keeps deleted chunks, and
// removes one just before each new file is written) and waits -idle.
// It prints the process's CPU seconds per GB of each phase.
//
//	go run ./bench/tmpfsnew -dir /dev/shm/tn -idle 10s
//	go run ./bench/tmpfsnew -dir /dev/shm/tn -idle 10s -keep
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

const fileSize = 4 << 20

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		log.Fatal(err)
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func main() {
	dir := flag.String("dir", "", "a directory on tmpfs (created, removed at the end)")
	size := flag.Int64("size", 4<<30, "bytes written per phase")
	rounds := flag.Int("rounds", 5, "rounds")
	idle := flag.Duration("idle", 10*time.Second, "wait after each round's removal")
	keep := flag.Bool("keep", false, "move removed files aside and remove one just before each new file")
	flag.Parse()
	if *dir == "" {
		log.Fatal("-dir is required")
	}
	files, kept := filepath.Join(*dir, "files"), filepath.Join(*dir, "kept")
	for _, d := range []string{files, kept} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			log.Fatal(err)
		}
	}
	defer os.RemoveAll(*dir)
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	n := int(*size / fileSize)
	var pool []string
	write := func(fresh bool) float64 {
		c0 := cpuSeconds()
		for i := 0; i < n; i++ {
			if fresh && len(pool) > 0 {
				os.Remove(pool[len(pool)-1])
				pool = pool[:len(pool)-1]
			}
			f, err := os.OpenFile(filepath.Join(files, fmt.Sprint(i)), os.O_CREATE|os.O_WRONLY, 0o600)
			if err != nil {
				log.Fatal(err)
			}
			for off := 0; off < fileSize; off += len(buf) {
				if _, err := f.WriteAt(buf, int64(off)); err != nil {
					log.Fatal(err)
				}
			}
			f.Close()
		}
		return (cpuSeconds() - c0) / (float64(n) * fileSize / 1e9)
	}
	for r := 1; r <= *rounds; r++ {
		t := time.Now()
		nw := write(true)
		tn := time.Since(t)
		ow := write(false)
		fmt.Printf("round %d: new %.3f CPU-s/GB (%.1f s), overwrite %.3f, keep=%v idle=%v\n", r, nw, tn.Seconds(), ow, *keep, *idle)
		for i := 0; i < n; i++ {
			p := filepath.Join(files, fmt.Sprint(i))
			if *keep {
				k := filepath.Join(kept, fmt.Sprintf("%d-%d", r, i))
				if err := os.Rename(p, k); err == nil {
					pool = append(pool, k)
					continue
				}
			}
			os.Remove(p)
		}
		time.Sleep(*idle)
	}
}
