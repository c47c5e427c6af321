package fwd_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluice-hpc/sluice/data"
	"github.com/sluice-hpc/sluice/fwd"
	"github.com/sluice-hpc/sluice/internal/rpc"
	"github.com/sluice-hpc/sluice/internal/testrig"
	"github.com/sluice-hpc/sluice/internal/wire/ns"
	"github.com/sluice-hpc/sluice/meta"
)

// multiStack starts a metadata service, n mem data servers and a
// forwarding daemon in this process; it returns a client of the
// forwarding daemon and the data servers.
func multiStack(t *testing.T, n int) (*rpc.Client, []*data.Server) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	svc, metaAddr := testrig.Meta(t, meta.Config{})
	var dss []*data.Server
	for i := 0; i < n; i++ {
		dss = append(dss, memServer(t, ctx, metaAddr, 0, nil))
	}
	fs := fwd.New(fwd.Config{Meta: metaAddr, Secret: secret, Log: quiet()})
	fln, _ := fs.Listen()
	go fs.Run(ctx, fln, "")
	c := rpc.NewClient(fs.Addr(), secret, rpc.ClientOptions{Timeout: 30 * time.Second})
	t.Cleanup(c.Close)
	testrig.WaitData(t, svc, n)
	return c, dss
}

// TestConcurrentFirstWritesOfRefusedChunk: several writes of one new chunk
// at once, and the server it was placed on refuses new chunks (full): the
// chunk moves once, and every write's bytes are in the chunk where it
// ended up. (Each refused write used to move the chunk again, so writes
// that had landed in an earlier place were lost.)
func TestConcurrentFirstWritesOfRefusedChunk(t *testing.T) {
	ctx := context.Background()
	// one server of three refuses new chunks; the metadata service does
	// not know yet (it learns usage from heartbeats). A fresh cluster each
	// round: a refusal keeps a server from new chunks until it reports.
	for round := 0; round < 9; round++ {
		c, dss := multiStack(t, 3)
		ino := create(t, c, "f")
		dss[round%3].Store().SetCapacity(1)
		const pieces = 16
		want := make([]byte, pieces*4096)
		var wg sync.WaitGroup
		for p := 0; p < pieces; p++ {
			b := bytes.Repeat([]byte{byte(1 + p)}, 4096)
			copy(want[p*4096:], b)
			wg.Add(1)
			go func(p int, b []byte) {
				defer wg.Done()
				if _, _, err := rpc.DoPayload(ctx, c, ns.Write, &ns.IOReq{Ino: ino, Off: uint64(p * 4096), Len: 4096}, b, nil); err != nil {
					t.Errorf("write %d: %v", p, err)
				}
			}(p, b)
		}
		wg.Wait()
		_, got, err := rpc.DoPayload(ctx, c, ns.Read, &ns.IOReq{Ino: ino, Len: uint64(len(want))}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			lost := 0
			for p := 0; p < pieces; p++ {
				if !bytes.Equal(got[p*4096:min(len(got), (p+1)*4096)], want[p*4096:(p+1)*4096]) {
					lost++
				}
			}
			t.Fatalf("round %d: %d of %d concurrent first writes lost (%d bytes read)", round, lost, pieces, len(got))
		}
	}
}
