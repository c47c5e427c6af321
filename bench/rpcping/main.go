// Command rpcping measures the round-trip latency of one sluice daemon:
// it sends N requests of one kind, one at a time, and prints the mean and
// the 50th and 99th percentiles. It isolates one hop of the forwarding path
// (client → forwarding daemon, forwarding daemon → metadata service) from
// FUSE.
//
//	rpcping -secret-file STATE/secret -op getattr -n 20000 ADDR
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
)

func main() {
	n := flag.Int("n", 20000, "requests")
	secretFile := flag.String("secret-file", "", "cluster secret")
	op := flag.String("op", "ping", "ping | getattr (inode 1)")
	flag.Parse()
	if flag.NArg() != 1 || *secretFile == "" {
		fmt.Fprintln(os.Stderr, "usage: rpcping -secret-file F [-op ping|getattr] [-n N] ADDR")
		os.Exit(2)
	}
	secret, err := os.ReadFile(*secretFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rpcping:", err)
		os.Exit(1)
	}
	c := rpc.NewClient(flag.Arg(0), []byte(strings.TrimSpace(string(secret))), rpc.ClientOptions{})
	defer c.Close()
	ctx := context.Background()
	call := func() error {
		_, err := rpc.Do(ctx, c, ns.Ping, &ns.PingReq{})
		return err
	}
	if *op == "getattr" {
		call = func() error {
			_, err := rpc.Do(ctx, c, ns.Getattr, &ns.InoReq{Ino: 1})
			return err
		}
	}
	lat := make([]time.Duration, *n)
	for i := range lat {
		t0 := time.Now()
		if err := call(); err != nil {
			fmt.Fprintln(os.Stderr, "rpcping:", err)
			os.Exit(1)
		}
		lat[i] = time.Since(t0)
	}
	var sum time.Duration
	for _, l := range lat {
		sum += l
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	fmt.Printf("%s %s: n=%d mean=%v p50=%v p99=%v\n", flag.Arg(0), *op, *n,
		sum/time.Duration(*n), lat[*n/2], lat[*n*99/100])
}
