package plots

import (
	"bytes"
	"strings"
	"testing"

	"gonum.org/v1/plot/plotter"

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

// Curves: one coloured line per series, points sorted by x; nothing to
// plot is an error.
func TestCurves(t *testing.T) {
	ss := []Series{{"bbos", plotter.XYs{{X: 1.9, Y: 1.88}, {X: 1.0, Y: 1.0}}}, {"dedicated", plotter.XYs{{X: 1.0, Y: 1.0}, {X: 1.9, Y: 1.0}}}}
	var a, b bytes.Buffer
	if err := Curves(&a, "served", "DWPP (S)", "served (S)", ss); err != nil {
		t.Fatal(err)
	}
	if err := Curves(&b, "served", "DWPP (S)", "served (S)", ss); err != nil || !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("the same series drew different SVGs", err)
	}
	for _, want := range []string{"<svg", "served", "bbos", "dedicated"} {
		if !strings.Contains(a.String(), want) {
			t.Fatalf("plot lacks %q", want)
		}
	}
	if ss[0].XY[0].X != 1.9 {
		t.Fatal("Curves sorted the caller's points")
	}
	if err := Curves(&a, "none", "x", "y", []Series{{"a", nil}}); err == nil {
		t.Fatal("a plot of nothing drew")
	}
}
