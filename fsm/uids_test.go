package fsm

import (
	"bytes"
	"io"
	"testing"

	"github.com/weft-sched/weft/scheduler"
)

// Every app takes a uid of the range no running app holds; an ended app's
// uid is free again; a full range refuses a submit, naming the setting,
// and changes nothing; a snapshot keeps who holds what.
func TestFreeUID(t *testing.T) {
	h := newHarness(t)
	r := UIDRange{First: 70000, Last: 70002}
	spec := scheduler.AppSpec{DShell: scheduler.DShell{NumContainers: 1, Command: []string{"true"}}}
	submit := func() *scheduler.App {
		return h.app(h.ok(AppSubmitType, &AppSubmitRequest{Spec: spec, Now: 1, UIDs: r}).(string))
	}
	held := map[uint32]string{}
	var apps []*scheduler.App
	for i := 0; i < 3; i++ {
		a := submit()
		if a.UID < r.First || a.UID > r.Last {
			t.Fatalf("app %s got uid %d, outside %d-%d", a.ID, a.UID, r.First, r.Last)
		}
		if other, dup := held[a.UID]; dup {
			t.Fatalf("apps %s and %s both hold uid %d", other, a.ID, a.UID)
		}
		held[a.UID] = a.ID
		apps = append(apps, a)
		if got, ok := h.f.State().AppByUID(a.UID); !ok || got.ID != a.ID {
			t.Fatalf("AppByUID(%d) = %v, %v", a.UID, got, ok)
		}
	}
	h.refused(AppSubmitType, &AppSubmitRequest{Spec: spec, Now: 1, UIDs: r}, "dynamic_uid_range 70000-70002")
	if n := len(h.f.State().Apps()); n != 3 {
		t.Fatalf("a refused submit left %d apps", n)
	}
	// An app that ends frees its uid for the next.
	h.ok(AppFinishType, &AppFinishRequest{AppID: apps[1].ID, State: scheduler.AppKilled, Now: 2})
	if _, ok := h.f.State().AppByUID(apps[1].UID); ok {
		t.Fatalf("uid %d is still held by a killed app", apps[1].UID)
	}
	if a := submit(); a.UID != apps[1].UID {
		t.Fatalf("the next app got uid %d, want the freed %d", a.UID, apps[1].UID)
	}
	// Without a range, no uid.
	if a := h.app(h.ok(AppSubmitType, &AppSubmitRequest{Spec: spec, Now: 1}).(string)); a.UID != 0 {
		t.Fatalf("an app without a range got uid %d", a.UID)
	}
	// A restored state knows who holds what.
	g := New(nil)
	if err := g.Restore(io.NopCloser(bytes.NewReader(persist(t, h.f)))); err != nil {
		t.Fatal(err)
	}
	for uid := r.First; uid <= r.Last; uid++ {
		a, ok := h.f.State().AppByUID(uid)
		b, ok2 := g.State().AppByUID(uid)
		if ok != ok2 || ok && a.ID != b.ID {
			t.Fatalf("uid %d: held by %v before the snapshot, %v after", uid, a, b)
		}
	}
	if g.State().numActiveUIDs != h.f.State().numActiveUIDs || g.State().numActiveUIDs != 3 {
		t.Fatalf("%d uids held after restore, %d before; want 3", g.State().numActiveUIDs, h.f.State().numActiveUIDs)
	}
}
