package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
)

// heapPeak writes a heap profile (go tool pprof FILE) of `sluice sim day`
// when its live heap is largest: check is called after every simulated
// hour and once a run ends, and the profile is written again whenever the
// heap live after the last collection has grown by an eighth past the
// one written (so a run that grows steadily writes it about 40 times
// between 100 MiB and 10 GiB, not every hour).
type heapPeak struct {
	path    string
	sample  []metrics.Sample
	written uint64 // live bytes when the file was last written
	peak    uint64 // largest live heap seen
	err     error  // the first failure to write (then no more tries)
}

func newHeapPeak(path string) *heapPeak {
	if path == "" {
		return nil
	}
	return &heapPeak{path: path, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
}

// check writes the profile if the live heap has grown enough since.
func (h *heapPeak) check() {
	if h == nil || h.err != nil {
		return
	}
	metrics.Read(h.sample)
	if h.sample[0].Value.Kind() != metrics.KindUint64 {
		h.err = fmt.Errorf("--memprofile: this Go runtime has no %s", h.sample[0].Name)
		return
	}
	live := h.sample[0].Value.Uint64()
	h.peak = max(h.peak, live)
	if live <= h.written+h.written/8 {
		return
	}
	h.err = h.write()
	h.written = live
}

func (h *heapPeak) write() error {
	f, err := os.Create(h.path)
	if err != nil {
		return err
	}
	// the profile's in-use figures are as of the last collection, as the
	// live bytes that chose this moment
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// done reports where the profile is, or why it is not.
func (h *heapPeak) done() error {
	if h == nil {
		return nil
	}
	h.check()
	if h.err != nil {
		return fmt.Errorf("--memprofile %s: %w", h.path, h.err)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Fprintf(os.Stderr, "heap profile of %.0f MiB live (the largest seen: %.0f MiB; %.0f MiB obtained from the OS) in %s\n",
		float64(h.written)/(1<<20), float64(h.peak)/(1<<20), float64(ms.Sys)/(1<<20), h.path)
	return nil
}
