package scheduler

import (
	"strings"
	"testing"
)

// An unmanaged AM's app (SPEC §18) has no AM container: it is placed
// only its asks, which neither max_am_share nor max_running_apps hold
// back, and it holds a max_running_apps slot as a running app does — a
// managed app behind it waits for one.
func TestUnmanagedAMIsPlacedItsAsksOnly(t *testing.T) {
	cfg := leaves(PolicyFIFO, "q")
	one, tight := 1, 0.05
	cfg.Root.Children[0].MaxRunningApps = &one
	cfg.Root.Children[0].MaxAMShare = &tight
	small := Resources{MemoryMB: 512, Vcores: 1}
	spanning := runningApp("app-f1", "root.q", 1, 2, small)
	spanning.Spec.AMType, spanning.Unmanaged = AMTypeUnmanaged, &Unmanaged{Home: "sc1", Subcluster: "sc2"}
	spanning.Attempts = []Attempt{{Attempt: 1}}
	managed := &App{ID: "app-2", Queue: "root.q", State: AppAccepted, AMPending: true, CreateIndex: 2,
		Spec: AppSpec{AMResources: Resources{MemoryMB: 256, Vcores: 1}}}
	f := &fakeState{nodes: []*Node{node("n1", 8192, 8)}, cfg: cfg, apps: []*App{spanning, managed}}

	ps := schedule(f)
	for _, p := range ps {
		if p.AppID != "app-f1" || p.IsAM || p.Attempt != 1 || p.AskID != 1 {
			t.Fatalf("placement %+v, want only app-f1's asks, at attempt 1", p)
		}
	}
	if len(ps) != 2 {
		t.Fatalf("%d placements for the unmanaged AM's 2 asks", len(ps))
	}
	if w := held(f); !strings.Contains(w["app-2"], "max_running_apps 1") || w["app-f1"] != "" {
		t.Fatalf("waiting %v: want app-2 behind the unmanaged AM's slot", w)
	}
}
