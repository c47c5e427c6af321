package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TestZeroCopyReads reads a file through a cluster whose data servers
// answer with sendfile and whose forwarding daemons splice the answers on
// (--zero-copy): reads inside one chunk, across chunks, at the end of the
// file, in a hole and past the end, concurrently, each checked byte by
// byte; then a rewrite is read back. The daemons' counters must show
// that the zero-copy paths served reads (sendfile in the data servers,
// splices in the forwarding daemons) and writes (the mount's vmsplice,
// the daemons' pipes), not only that the bytes match.
func TestZeroCopyReads(t *testing.T) {
	base := freePorts(t, 8)
	c := startCluster(t, "--zero-copy=true", "--pprof-base", strconv.Itoa(base))
	const chunk = 4 << 20
	size := 3*chunk + 12345
	want := pattern(7, size)
	clear(want[chunk+1000 : chunk+300000]) // a hole inside the second chunk
	p := c.path("zc")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]int{{0, chunk + 1000}, {chunk + 300000, size}} {
		if _, err := f.WriteAt(want[r[0]:r[1]], int64(r[0])); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	f, err = os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	check := func(off, n int) {
		got := make([]byte, n)
		k, _ := f.ReadAt(got, int64(off))
		if off >= size {
			if k != 0 {
				t.Errorf("read of %d at %d past the end (%d): %d bytes", n, off, size, k)
			}
			return
		}
		end := min(off+n, size)
		if k != end-off || !bytes.Equal(got[:k], want[off:end]) {
			t.Errorf("read of %d at %d: %d bytes, want %d, equal %v", n, off, k, end-off, bytes.Equal(got[:k], want[off:end]))
		}
	}
	for _, r := range [][2]int{{0, 1 << 20}, {4096, 4096}, {chunk - 100, 200}, {chunk, chunk},
		{chunk + 500, 4096}, {chunk + 2000, 1 << 20}, {3 * chunk, 1 << 20}, {size - 10, 10}, {size + 1, 100}} {
		check(r[0], r[1])
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(g)))
			for i := 0; i < 50; i++ {
				check(rng.Intn(size), 1+rng.Intn(1<<20))
			}
		}(g)
	}
	wg.Wait()
	// a sequential reader of 1 MiB reads: the readahead's fetches are
	// taken whole, from pipes, their replies spliced into the FUSE device
	// (the mount's --splice-reads, where `sluice cluster up` could give pipes
	// room for 1 MiB and a header)
	seq := func() {
		g, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		var got []byte
		buf := make([]byte, 1<<20)
		for {
			k, err := g.Read(buf)
			got = append(got, buf[:k]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("sequential read: %d bytes of %d, not the bytes written", len(got), len(want))
		}
	}
	seq()
	if pm, err := os.ReadFile("/proc/sys/fs/pipe-max-size"); err == nil {
		if v, _ := strconv.Atoi(strings.TrimSpace(string(pm))); v > 1<<20 {
			spliced := sumCounter(t, c, base, "sluice_client_spliced_reads_total")
			t.Logf("reads spliced from readahead pipes into the FUSE device: %g", spliced)
			if spliced == 0 {
				t.Fatal("no sequential read was spliced into the FUSE device")
			}
		}
	}
	copy(want[10:], pattern(8, 5000))
	if err := os.WriteFile(p, want, 0o644); err != nil {
		t.Fatal(err)
	}
	check(0, 1<<20)
	seq() // the readahead of the file as it is now
	sendfiles := sumCounter(t, c, base, "sluice_data_sendfile_reads_total")
	splices := sumCounter(t, c, base, "sluice_fwd_spliced_reads_total")
	t.Logf("reads answered by sendfile: %g, spliced by forwarding daemons: %g", sendfiles, splices)
	if sendfiles == 0 || splices == 0 {
		t.Fatalf("the zero-copy paths were not taken: %g sendfile reads, %g spliced", sendfiles, splices)
	}
	// the file was written in 1 MiB writes: their payloads went through
	// pipes in the forwarding daemons and the data servers
	fwdWrites := sumCounter(t, c, base, "sluice_fwd_spliced_writes_total")
	dataWrites := sumCounter(t, c, base, "sluice_data_spliced_writes_total")
	t.Logf("writes kept in pipes: %g by forwarding daemons, %g spliced into chunks", fwdWrites, dataWrites)
	if fwdWrites == 0 || dataWrites == 0 {
		t.Fatalf("the zero-copy write paths were not taken: %g, %g", fwdWrites, dataWrites)
	}
	// and the mount's write-behind sent them to the forwarding daemon by
	// reference (vmsplice), the bytes checked above
	byRef := sumCounter(t, c, base, "sluice_client_byref_writes_total")
	t.Logf("writes the mount sent by reference: %g", byRef)
	if byRef == 0 {
		t.Fatal("the mount sent no write by reference")
	}
	// from go-fuse's request buffer itself, not a copy (fuse.WriteOwner)
	kept := sumCounter(t, c, base, "sluice_client_kept_writes_total")
	t.Logf("writes sent from the kernel request's buffer: %g", kept)
	if kept == 0 {
		t.Fatal("every write was copied out of go-fuse's request buffer")
	}
}

// freePorts returns the first of n consecutive loopback ports that are
// free now (for `sluice cluster up --pprof-base`).
func freePorts(t *testing.T, n int) int {
	t.Helper()
	for try := 0; try < 50; try++ {
		base := 30000 + rand.Intn(20000)
		var ls []net.Listener
		for i := 0; i < n; i++ {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+i))
			if err != nil {
				break
			}
			ls = append(ls, l)
		}
		for _, l := range ls {
			l.Close()
		}
		if len(ls) == n {
			return base
		}
	}
	t.Fatal("no free port range")
	return 0
}

// sumCounter adds up a Prometheus counter over every daemon of a cluster
// started with --pprof-base base (daemon i serves /metrics on base+i, in
// cluster.json's order).
func sumCounter(t *testing.T, c *cluster, base int, name string) float64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(c.dir, "cluster.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cl struct{ Daemons []struct{ Name string } }
	if err := json.Unmarshal(b, &cl); err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for i := range cl.Daemons {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", base+i))
		if err != nil {
			t.Fatalf("metrics of %s: %v", cl.Daemons[i].Name, err)
		}
		text, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, l := range strings.Split(string(text), "\n") {
			if strings.HasPrefix(l, name+" ") || strings.HasPrefix(l, name+"{") {
				v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64)
				if err == nil {
					sum += v
				}
			}
		}
	}
	return sum
}
