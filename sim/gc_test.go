package sim

import "testing"

func TestGCLimit(t *testing.T) {
	if got, err := GCLimit("off", 10); err != nil || got != 0 {
		t.Fatalf("off: %d, %v", got, err)
	}
	if got, err := GCLimit("512", 10); err != nil || got != 512<<20 {
		t.Fatalf("512: %d, %v", got, err)
	}
	total, err := physicalMemory()
	if err != nil {
		t.Fatal(err)
	}
	if total < 16<<30 {
		return // the cap below would bind; this machine is too small to check the sizing
	}
	if auto, err := GCLimit("auto", 100); err != nil || auto != 1<<30 {
		t.Fatalf("auto for 100 nodes: %d, %v; want 1 GiB", auto, err)
	}
	if auto, err := GCLimit("auto", 10_000); err != nil || auto != 512<<20+10_000*256<<10 {
		t.Fatalf("auto for 10,000 nodes: %d, %v", auto, err)
	}
	if auto, err := GCLimit("auto", 10_000_000); err != nil || auto != total/4 {
		t.Fatalf("auto for 10 M nodes: %d, %v; want a quarter of %d", auto, err, total)
	}
	for _, bad := range []string{"lots", "-1", "10", "1.5"} {
		if _, err := GCLimit(bad, 10); err == nil {
			t.Fatalf("%q was taken", bad)
		}
	}
}
