package scheduler

import (
	"sort"
	"strings"
	"testing"
)

func TestCompareIDsReadsNumbersAsNumbers(t *testing.T) {
	in := []string{"app-10", "app-9", "app-100", "app-1", "c-12-10", "c-12-2", "c-9-1", "o-n1-2-10", "o-n1-2-9", "o-n1-10-1", "n10", "n2", "n02", "app-"}
	sort.Slice(in, func(i, j int) bool { return CompareIDs(in[i], in[j]) < 0 })
	want := "app-,app-1,app-9,app-10,app-100,c-9-1,c-12-2,c-12-10,n2,n02,n10,o-n1-2-9,o-n1-2-10,o-n1-10-1"
	if got := strings.Join(in, ","); got != want {
		t.Fatalf("sorted %s\nwant   %s", got, want)
	}
	for _, p := range [][2]string{{"a", "a"}, {"app-7", "app-7"}} {
		if CompareIDs(p[0], p[1]) != 0 {
			t.Fatalf("%s and %s differ", p[0], p[1])
		}
	}
	if CompareIDs("n2", "n02") >= 0 || CompareIDs("n02", "n2") <= 0 {
		t.Fatal("n2 and n02: not a total order")
	}
}

func TestParseStatesNameTheValidOnes(t *testing.T) {
	if s, err := ParseContainerState("running"); err != nil || s != ContainerRunning {
		t.Fatalf("running: %v %v", s, err)
	}
	if s, err := ParseNodeStatus("Draining"); err != nil || s != NodeDraining {
		t.Fatalf("Draining: %v %v", s, err)
	}
	if s, err := ParseNodeStatus(""); err != nil || s != "" {
		t.Fatalf("empty: %v %v", s, err)
	}
	_, err := ParseContainerState("done")
	if err == nil || err.Error() != `state "done" is not a container state; use one of ALLOCATED, QUEUED, RUNNING, PAUSED, COMPLETED` {
		t.Fatalf("done: %v", err)
	}
	if _, err := ParseNodeStatus("up"); err == nil || !strings.Contains(err.Error(), "READY, DRAINING, DOWN") {
		t.Fatalf("up: %v", err)
	}
}
