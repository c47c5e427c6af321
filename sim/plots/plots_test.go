package plots

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sluice-hpc/sluice/sim"
)

// Both plots come out as SVG with their titles and legends, the same bytes
// for the same input (the simulator's outputs are reproducible), and a
// speed-up plot of nothing is an error, not an empty picture.
func TestPlots(t *testing.T) {
	tl := map[string][]sim.Sample{
		"ffm":  {{T: 0, FwdUse: 0.2, StorageUse: 0.1}, {T: 3600, FwdUse: 0.9, StorageUse: 0.5}},
		"dfra": {{T: 0, FwdUse: 0.3, StorageUse: 0.1}, {T: 3600, FwdUse: 0.6, StorageUse: 0.7}},
	}
	var a, b bytes.Buffer
	if err := Utilisation(&a, "util", []string{"ffm", "dfra"}, tl); err != nil {
		t.Fatal(err)
	}
	if err := Utilisation(&b, "util", []string{"ffm", "dfra"}, tl); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("the same timelines drew different SVGs")
	}
	for _, want := range []string{"<svg", "util", "dfra: storage", "ffm: forwarding nodes"} {
		if !strings.Contains(a.String(), want) {
			t.Fatalf("utilisation plot lacks %q", want)
		}
	}
	var c bytes.Buffer
	if err := Speedups(&c, "speed-ups", []float64{0.9, 1, 1, 2.5, 18.9}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(c.String(), "<svg") || !strings.Contains(c.String(), "speed-ups") {
		t.Fatal("speed-up plot is not an SVG with its title")
	}
	if err := Speedups(&c, "none", nil); err == nil {
		t.Fatal("a speed-up plot of no jobs drew")
	}
}

// A long timeline is averaged down to at most maxPoints points per line,
// keeping its mean.
func TestThin(t *testing.T) {
	var tl []sim.Sample
	for i := 0; i < 10*maxPoints+7; i++ {
		tl = append(tl, sim.Sample{T: float64(60 * i), FwdUse: float64(i % 2)})
	}
	var b bytes.Buffer
	if err := Utilisation(&b, "long", []string{"ffm"}, map[string][]sim.Sample{"ffm": tl}); err != nil {
		t.Fatal(err)
	}
	if b.Len() > 400<<10 {
		t.Fatalf("a %d-sample timeline drew %d bytes", len(tl), b.Len())
	}
}
