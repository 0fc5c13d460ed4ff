package sim

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// charts draws the run's time series as SVG line charts, one per measure.
func (r *Result) charts() map[string]string {
	series := func(f func(SeriesPoint) float64) []float64 {
		out := make([]float64, len(r.Series))
		for i, p := range r.Series {
			out[i] = f(p)
		}
		return out
	}
	return map[string]string{
		"allocations.svg": LineChart("Allocations per second", "containers/s", series(func(p SeriesPoint) float64 { return float64(p.Allocations) })),
		"running.svg":     LineChart("Running containers", "containers", series(func(p SeriesPoint) float64 { return float64(p.Running) })),
		"utilisation.svg": LineChart("Utilisation (vcores)", "%", series(func(p SeriesPoint) float64 { return 100 * p.Utilisation })),
		"heartbeat_p99.svg": LineChart("Heartbeat latency p99 per second", "ms",
			series(func(p SeriesPoint) float64 { return p.HeartbeatP99MS })),
	}
}

// LineChart draws ys (one a second) as a self-contained SVG line chart
// with axes, ticks and a title.
func LineChart(title, unit string, ys []float64) string {
	return Chart(title, unit, []Line{{Color: palette[0], Ys: ys}})
}

// Line is one series of a Chart: a value a second.
type Line struct {
	Name   string // in the legend; a chart of one unnamed line has none
	Color  string
	Ys     []float64
	Dashed bool
}

// palette is the colours of a chart's lines.
var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"}

// Chart draws lines (one value a second each) as a self-contained SVG
// line chart with axes, ticks, a title and, for named lines, a legend.
func Chart(title, unit string, lines []Line) string {
	const w, h, left, right, top, bottom = 640.0, 320.0, 64.0, 16.0, 32.0, 40.0
	pw, ph := w-left-right, h-top-bottom
	ymax, points := 0.0, 0
	for _, l := range lines {
		for _, y := range l.Ys {
			ymax = math.Max(ymax, y)
		}
		points = max(points, len(l.Ys))
	}
	ymax = niceCeil(ymax)
	n := max(points-1, 1)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="11">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", left, esc(title))
	for i := 0; i <= 4; i++ {
		v := ymax * float64(i) / 4
		y := top + ph - ph*float64(i)/4
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, y, left+pw, y)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, y+4, fmtNum(v))
	}
	for i := 0; i <= 5; i++ {
		x := left + pw*float64(i)/5
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%ds</text>`+"\n", x, top+ph+16, int(math.Round(float64(n)*float64(i)/5)))
	}
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", left, top+ph, left+pw, top+ph)
	fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", left, top, left, top+ph)
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">time since the nodes registered</text>`+"\n", left+pw/2, h-6)
	fmt.Fprintf(&b, `<text transform="translate(14 %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", top+ph/2, esc(unit))
	legend := 0
	for _, l := range lines {
		if len(l.Ys) > 0 {
			pts := make([]string, len(l.Ys))
			for i, y := range l.Ys {
				pts[i] = fmt.Sprintf("%.1f,%.1f", left+pw*float64(i)/float64(n), top+ph-ph*y/ymax)
			}
			dash := ""
			if l.Dashed {
				dash = ` stroke-dasharray="5,3"`
			}
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5"%s points="%s"/>`+"\n", l.Color, dash, strings.Join(pts, " "))
		}
		if l.Name != "" && !l.Dashed {
			y := top + 12 + 14*float64(legend)
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>`+"\n", left+pw-150, y-4, left+pw-132, y-4, l.Color)
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", left+pw-128, y, esc(l.Name))
			legend++
		}
	}
	if legend > 0 {
		y := top + 12 + 14*float64(legend)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#555" stroke-width="2" stroke-dasharray="5,3"/>`+"\n", left+pw-150, y-4, left+pw-132, y-4)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f">fair share (dashed)</text>`+"\n", left+pw-128, y)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (1 for v ≤ 0).
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func fmtNum(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.0fk", v/1e3)
	case v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
