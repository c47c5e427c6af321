// Package plots draws the simulator's results as SVG (gonum/plot): the
// utilisation of the forwarding layer and the storage over time, per
// policy, the distribution of per-job I/O speed-ups of one policy
// against another, and one figure against another per policy (the
// burst buffer's runs: Curves).
//
// It owns the drawing only: it reads results (sim.Sample, speed-ups)
// and runs no simulation or policy.
package plots

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/sluice-hpc/sluice/sim"
)

// palette colours the series in a fixed order (the output is the same
// for the same input).
var palette = []color.Color{
	color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
}

// Series is one named line of a plot.
type Series struct {
	Name string
	XY   plotter.XYs
}

// Utilisation plots, for each policy's timeline, the share of the
// forwarding layer's bandwidth and of the storage's bandwidth in use over
// simulated hours. Policies are drawn in the order given.
func Utilisation(w io.Writer, title string, policies []string, timelines map[string][]sim.Sample) error {
	var ss []Series
	for _, p := range policies {
		var fwd, st plotter.XYs
		for _, s := range timelines[p] {
			fwd = append(fwd, plotter.XY{X: s.T / 3600, Y: 100 * s.FwdUse})
			st = append(st, plotter.XY{X: s.T / 3600, Y: 100 * s.StorageUse})
		}
		ss = append(ss, Series{p + ": forwarding nodes", thin(fwd)}, Series{p + ": storage", thin(st)})
	}
	return lines(w, title, "simulated time (h)", "bandwidth in use (%)", ss)
}

// maxPoints bounds the points of a line: longer ones are averaged over
// equal runs of samples (a week of minutes would make a picture of
// megabytes).
const maxPoints = 1500

func thin(xy plotter.XYs) plotter.XYs {
	if len(xy) <= maxPoints {
		return xy
	}
	per := (len(xy) + maxPoints - 1) / maxPoints
	out := make(plotter.XYs, 0, maxPoints)
	for i := 0; i < len(xy); i += per {
		run := xy[i:min(i+per, len(xy))]
		var x, y float64
		for _, p := range run {
			x += p.X
			y += p.Y
		}
		out = append(out, plotter.XY{X: x / float64(len(run)), Y: y / float64(len(run))})
	}
	return out
}

// Speedups plots the distribution (CDF) of per-job speed-ups: the share
// of jobs (y) whose speed-up is at most x, x on a log scale.
func Speedups(w io.Writer, title string, speedups []float64) error {
	xs := slices.Clone(speedups)
	xs = slices.DeleteFunc(xs, func(x float64) bool { return !(x > 0) || math.IsInf(x, 0) })
	if len(xs) == 0 {
		return fmt.Errorf("no speed-up to plot")
	}
	slices.Sort(xs)
	cdf := make(plotter.XYs, 0, len(xs))
	for i, x := range xs {
		cdf = append(cdf, plotter.XY{X: x, Y: 100 * float64(i+1) / float64(len(xs))})
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "per-job I/O speed-up (×, log scale)"
	p.Y.Label.Text = "jobs with at most this speed-up (%)"
	if xs[len(xs)-1] >= 10*xs[0] {
		// log scale once the speed-ups span a decade (else its ticks,
		// powers of ten, would leave the axis bare)
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	} else {
		p.X.Label.Text = "per-job I/O speed-up (×)"
	}
	p.Y.Min, p.Y.Max = 0, 100
	p.Add(plotter.NewGrid())
	l, err := plotter.NewLine(cdf)
	if err != nil {
		return err
	}
	l.StepStyle = plotter.PostStep // a CDF rises at each job's value
	l.LineStyle.Color, l.LineStyle.Width = palette[0], vg.Points(1.5)
	p.Add(l)
	return save(p, w)
}

// Curves plots one line with points per series, each its own colour (the
// palette's six, then dashed), points sorted by x: a figure against a
// parameter per policy.
func Curves(w io.Writer, title, x, y string, ss []Series) error {
	p, n := frame(title, x, y, ss)
	if n == 0 {
		return fmt.Errorf("%s: nothing to plot", title)
	}
	for i, s := range ss {
		if len(s.XY) == 0 {
			continue
		}
		xy := slices.Clone(s.XY)
		slices.SortStableFunc(xy, func(a, b plotter.XY) int { return cmpFloat(a.X, b.X) })
		l, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
		c := palette[i%len(palette)]
		l.LineStyle.Color, l.LineStyle.Width = c, vg.Points(1)
		pts.Color = c
		if i >= len(palette) {
			l.LineStyle.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		p.Add(l, pts)
		p.Legend.Add(s.Name, l, pts)
	}
	return save(p, w)
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// frame is a plot with its title, axis labels and grid, the legend at
// the top left above the data (the y axis goes from 0 to 1.4 times the
// highest point), and how many points ss has.
func frame(title, x, y string, ss []Series) (*plot.Plot, int) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs = vg.Points(8)
	top, n := 0.0, 0
	for _, s := range ss {
		for _, xy := range s.XY {
			top = max(top, xy.Y)
			n++
		}
	}
	p.Y.Min, p.Y.Max = 0, max(top, 1e-9)*1.4
	p.Add(plotter.NewGrid())
	return p, n
}

func lines(w io.Writer, title, x, y string, ss []Series) error {
	p, _ := frame(title, x, y, ss)
	for i, s := range ss {
		if len(s.XY) == 0 {
			continue
		}
		l, err := plotter.NewLine(s.XY)
		if err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
		l.LineStyle.Color = palette[(i/2)%len(palette)]
		l.LineStyle.Width = vg.Points(1)
		if i%2 == 1 {
			l.LineStyle.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		p.Add(l)
		p.Legend.Add(s.Name, l)
	}
	return save(p, w)
}

func save(p *plot.Plot, w io.Writer) error {
	wt, err := p.WriterTo(9*vg.Inch, 4.5*vg.Inch, "svg")
	if err != nil {
		return err
	}
	_, err = wt.WriteTo(w)
	return err
}
