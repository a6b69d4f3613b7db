package main

import (
	"image/color"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

var (
	oursColor = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	twinColor = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
)

// writePlot draws, per concurrency, the latency distributions (empirical CDFs, log time axis) of captchaflow
// against the bare twin: start → result on the left, callback → result (twin: signal → result) on the right.
func writePlot(path string, samples []latencySamples, server string) error {
	rows := make([][]*plot.Plot, 0, len(samples))
	for _, s := range samples {
		left, err := cdfPlot(s.Label+": start → result", s.OursStart, s.TwinStart, "twin")
		if err != nil {
			return err
		}
		right, err := cdfPlot(s.Label+": callback → result", s.OursCallback, s.TwinCallback, "twin (signal → result)")
		if err != nil {
			return err
		}
		rows = append(rows, []*plot.Plot{left, right})
	}
	const colW, rowH = 5.2 * vg.Inch, 3.4 * vg.Inch
	header := 0.4 * vg.Inch
	w, h := 2*colW, vg.Length(len(rows))*rowH+header
	var canvas interface {
		vg.CanvasSizer
		io.WriterTo
	}
	if strings.HasSuffix(path, ".png") {
		canvas = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110), vgimg.UseBackgroundColor(color.White))}
	} else {
		canvas = vgsvg.New(w, h)
	}
	dc := draw.New(canvas)
	dc.FillText(draw.TextStyle{
		Color:   color.Black,
		Font:    font.From(plot.DefaultFont, 13),
		Handler: plot.DefaultTextHandler,
	}, vg.Point{X: 0.2 * vg.Inch, Y: h - 0.3*vg.Inch}, "captchaflow vs bare twin — "+server)
	body := draw.Crop(dc, 0, 0, 0, -header)
	tiles := draw.Tiles{Rows: len(rows), Cols: 2, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(rows, tiles, body)
	for i := range rows {
		for j := range rows[i] {
			rows[i][j].Draw(canvases[i][j])
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := canvas.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func cdfPlot(title string, ours, twin []float64, twinLabel string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "latency, ms (log scale)"
	p.Y.Label.Text = "share of tasks ≤ x"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = ticks125{}
	p.Y.Min, p.Y.Max = 0, 1
	p.Legend.Top = false
	p.Legend.Left = false
	p.Legend.XOffs = -vg.Millimeter * 2
	p.Legend.YOffs = vg.Millimeter * 2
	p.Add(plotter.NewGrid())
	for _, series := range []struct {
		label string
		xs    []float64
		col   color.Color
		dash  []vg.Length
	}{
		{"captchaflow", ours, oursColor, nil},
		{twinLabel, twin, twinColor, []vg.Length{vg.Points(4), vg.Points(2)}},
	} {
		if len(series.xs) == 0 {
			continue
		}
		l, err := plotter.NewLine(ecdf(series.xs))
		if err != nil {
			return nil, err
		}
		l.Color = series.col
		l.Width = vg.Points(1.5)
		l.Dashes = series.dash
		p.Add(l)
		p.Legend.Add(series.label, l)
	}
	return p, nil
}

// ecdf is the empirical CDF of xs as a step line; values below 0.1 ms are clamped for the log axis.
func ecdf(xs []float64) plotter.XYs {
	s := slices.Clone(xs)
	slices.Sort(s)
	pts := make(plotter.XYs, 0, 2*len(s))
	n := float64(len(s))
	for i, x := range s {
		x = max(x, 0.1)
		pts = append(pts, plotter.XY{X: x, Y: float64(i) / n}, plotter.XY{X: x, Y: float64(i+1) / n})
	}
	return pts
}

// ticks125 labels a log axis at 1, 2 and 5 times the powers of ten in its range.
type ticks125 struct{}

func (ticks125) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for p := math.Pow(10, math.Floor(math.Log10(lo))); p <= hi; p *= 10 {
		for _, m := range []float64{1, 2, 5} {
			if v := m * p; v >= lo && v <= hi {
				ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
			}
		}
	}
	if len(ts) >= 2 {
		return ts
	}
	// A range narrower than that (e.g. 2 100–3 100 ms) gets linear ticks.
	return plot.DefaultTicks{}.Ticks(lo, hi)
}
