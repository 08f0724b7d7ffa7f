package main

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// chart draws, for each metric, the three peers' medians as horizontal
// bars relative to the raw WebSocket (W = 1), each labelled with its value;
// with a baseline, P's median before is a fourth bar.
func chart(title string, ms []*metric) string {
	const (
		left, barH, gap, groupGap = 300, 14, 2, 16
		width, scaleW             = 900, 480
	)
	colors := []string{"#2b6cb0", "#a0aec0", "#dd6b20", "#90cdf4"}
	names := []string{"procwire", "raw WebSocket", "SSH", "procwire before"}
	bars := func(m *metric) []float64 {
		v := []float64{median(m.column(peerP)), median(m.column(peerW)), median(m.column(peerS))}
		if b := median(m.before); !math.IsNaN(b) {
			v = append(v, b)
		}
		return v
	}
	var maxRel float64
	height, legend := 70+20, 3
	for _, m := range ms {
		vs := bars(m)
		for _, v := range vs {
			maxRel = max(maxRel, v/vs[peerW])
		}
		height += len(vs)*(barH+gap) + groupGap
		legend = max(legend, len(vs))
	}
	maxRel = min(maxRel, 3) // a longer bar is cut at the edge, its label still exact
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="14" font-weight="bold">procwire vs raw WebSocket vs SSH (bar length relative to raw WebSocket)</text>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="38" font-size="11">%s</text>`+"\n", html.EscapeString(title))
	for p := range legend {
		x := 10 + p*150
		fmt.Fprintf(&b, `<rect x="%d" y="48" width="12" height="12" fill="%s"/><text x="%d" y="58">%s</text>`+"\n", x, colors[p], x+16, names[p])
	}
	y := 70
	oneX := left + int(scaleW/maxRel)
	for _, m := range ms {
		dir := "lower is better"
		if m.higher {
			dir = "higher is better"
		}
		fmt.Fprintf(&b, `<text x="10" y="%d">%s</text>`+"\n", y+barH+2, html.EscapeString(m.name))
		fmt.Fprintf(&b, `<text x="10" y="%d" font-size="10" fill="#555">%s, %s</text>`+"\n", y+2*barH+6, html.EscapeString(m.unit), dir)
		vs := bars(m)
		for p, v := range vs {
			bw := min(int(scaleW*(v/vs[peerW])/maxRel), scaleW)
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="%s"/>`, left, y, bw, barH, colors[p])
			fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11">%s</text>`+"\n", left+bw+4, y+barH-3, format(v))
			y += barH + gap
		}
		y += groupGap
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="66" x2="%d" y2="%d" stroke="#333" stroke-dasharray="3,3"/>`+"\n", oneX, oneX, y)
	b.WriteString("</svg>\n")
	return b.String()
}
