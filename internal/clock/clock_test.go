package clock

import (
	"testing"
	"time"
)

func TestFakeFiresTimersAndTicksInOrder(t *testing.T) {
	start := time.Unix(1000, 0)
	f := NewFake(start)
	tick := f.NewTicker(time.Second)
	after := f.After(1500 * time.Millisecond)

	f.Advance(999 * time.Millisecond)
	select {
	case <-tick.C():
		t.Fatal("ticked before a second passed")
	case <-after:
		t.Fatal("timer fired early")
	default:
	}
	f.Advance(time.Millisecond)
	if got := <-tick.C(); !got.Equal(start.Add(time.Second)) {
		t.Fatalf("tick at %v, want %v", got, start.Add(time.Second))
	}
	f.Advance(600 * time.Millisecond)
	if got := <-after; !got.Equal(start.Add(1500 * time.Millisecond)) {
		t.Fatalf("timer at %v", got)
	}
	// Two more seconds pass with nobody reading: one tick is kept.
	f.Advance(2 * time.Second)
	<-tick.C()
	select {
	case <-tick.C():
		t.Fatal("a missed tick was kept")
	default:
	}
	if got := f.Now(); !got.Equal(start.Add(3600 * time.Millisecond)) {
		t.Fatalf("now %v", got)
	}
	tick.Stop()
	if n := f.Waiters(); n != 0 {
		t.Fatalf("%d waiters after the ticker stopped", n)
	}
}
