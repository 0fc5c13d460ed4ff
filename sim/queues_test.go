package sim

import (
	"strings"
	"testing"
)

func TestQueueSharesSummarised(t *testing.T) {
	w := &queueWatch{points: []QueuePoint{
		{Second: 0, Queue: "root.b", Used: 0.1, Fair: 0.5, Steady: 0.5, Pending: true}, // starved: under half its share, asking
		{Second: 0, Queue: "root.a", Used: 0.6, Fair: 0.5, Steady: 0.5},
		{Second: 1, Queue: "root.b", Used: 0.3, Fair: 0.5, Steady: 0.5, Pending: true},
		{Second: 1, Queue: "root.a", Used: 0.4, Fair: 0.5, Steady: 0.5},
		{Second: 2, Queue: "root.b", Used: 0.1, Fair: 0.5, Steady: 0.5}, // under half, asking for nothing
	}}
	points, sums := w.summarise()
	if len(points) != 5 || len(sums) != 2 || sums[0].Queue != "root.a" || sums[1].Queue != "root.b" {
		t.Fatalf("summaries %+v", sums)
	}
	if a := sums[0]; a.UsedMean != 0.5 || a.FairMean != 0.5 || a.StarvedSeconds != 0 {
		t.Errorf("root.a: %+v", a)
	}
	if b := sums[1]; b.StarvedSeconds != 1 || b.UsedMean < 0.166 || b.UsedMean > 0.167 {
		t.Errorf("root.b: %+v, want 1 starved second and a mean of 1/6", b)
	}
	csv := queuesCSV(points)
	if !strings.HasPrefix(csv, "second,queue,used_share,fair_share,steady_fair_share,pending\n") || !strings.Contains(csv, "1,root.a,0.4000,0.5000,0.5000,false\n") {
		t.Errorf("queues.csv:\n%s", csv)
	}
	svg := queueChart(points, sums)
	if strings.Count(svg, "<polyline") != 4 || strings.Count(svg, `stroke-dasharray="5,3" points=`) != 2 ||
		!strings.Contains(svg, "root.a used") || !strings.Contains(svg, "root.b used") {
		t.Errorf("chart: want a solid and a dashed line per queue, with a legend:\n%s", svg)
	}
}
