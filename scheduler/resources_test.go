package scheduler

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestResourcesArithmetic(t *testing.T) {
	a := Resources{MemoryMB: 4096, Vcores: 4, Extended: map[string]int64{"gpu": 2}}
	b := Resources{MemoryMB: 1024, Vcores: 1, Extended: map[string]int64{"gpu": 2, "fpga": 1}}

	sum := a.Add(b)
	if sum.MemoryMB != 5120 || sum.Vcores != 5 || sum.Get("gpu") != 4 || sum.Get("fpga") != 1 {
		t.Fatalf("Add = %v", sum)
	}
	diff := a.Sub(b)
	if diff.MemoryMB != 3072 || diff.Vcores != 3 || diff.Get("gpu") != 0 || diff.Get("fpga") != -1 {
		t.Fatalf("Sub = %v", diff)
	}
	if _, ok := diff.Extended["gpu"]; ok {
		t.Fatalf("Sub kept a zero extended entry: %v", diff.Extended)
	}
	if a.Get("gpu") != 2 || len(a.Extended) != 1 {
		t.Fatalf("Add/Sub modified their receiver: %v", a)
	}
	if !b.Sub(b).IsZero() {
		t.Fatalf("b-b is not zero: %v", b.Sub(b))
	}
}

func TestResourcesFits(t *testing.T) {
	capacity := Resources{MemoryMB: 8192, Vcores: 8, Extended: map[string]int64{"gpu": 1}}
	cases := []struct {
		ask  Resources
		want bool
	}{
		{Resources{MemoryMB: 8192, Vcores: 8}, true},
		{Resources{MemoryMB: 8193, Vcores: 1}, false},
		{Resources{MemoryMB: 1, Vcores: 9}, false},
		{Resources{Extended: map[string]int64{"gpu": 1}}, true},
		{Resources{Extended: map[string]int64{"gpu": 2}}, false},
		{Resources{Extended: map[string]int64{"fpga": 1}}, false}, // capacity has none
	}
	for _, c := range cases {
		if got := c.ask.Fits(capacity); got != c.want {
			t.Errorf("%v.Fits(%v) = %v, want %v", c.ask, capacity, got, c.want)
		}
	}
}

func TestParseResourcesRoundTrip(t *testing.T) {
	r, err := ParseResources("memory_mb=8192, vcores=8,gpu=2")
	if err != nil {
		t.Fatal(err)
	}
	if r.MemoryMB != 8192 || r.Vcores != 8 || r.Get("gpu") != 2 {
		t.Fatalf("parsed %v", r)
	}
	if s := r.String(); s != "memory_mb=8192,vcores=8,gpu=2" {
		t.Fatalf("String = %q", s)
	}
	again, err := ParseResources(r.String())
	if err != nil || again.String() != r.String() {
		t.Fatalf("round trip: %v %v", again, err)
	}
}

func TestParseResourcesErrorsNameTheField(t *testing.T) {
	for in, want := range map[string]string{
		"memory_mb":                "want name=value",
		"memory_mb=-1":             "memory_mb",
		"vcores=two":               "vcores",
		"memory_mb=1,memory_mb=2":  "given twice",
		"GPU=1":                    "lower-case",
		"memory_mb=1,vcores=1,x!=": "x!",
	} {
		_, err := ParseResources(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseResources(%q) = %v, want an error mentioning %q", in, err, want)
		}
	}
}

func TestResourcesJSONIsFlat(t *testing.T) {
	r := Resources{MemoryMB: 1024, Vcores: 2, Extended: map[string]int64{"gpu": 1}}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"gpu":1,"memory_mb":1024,"vcores":2}` {
		t.Fatalf("JSON = %s", b)
	}
	var back Resources
	if err := json.Unmarshal(b, &back); err != nil || back.String() != r.String() {
		t.Fatalf("unmarshal: %v %v", back, err)
	}
}
