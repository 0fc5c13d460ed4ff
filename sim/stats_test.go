package sim

import (
	"testing"
	"time"
)

// The sampler ticks about once a second, not on the second: two samples
// that fall in one second are averaged, a second no tick fell in has no
// sample (and counts in no mean), and a restart (a warm-up's end)
// forgets everything gathered before it.
func TestSamplesAverageWithinASecondAndRestartForgets(t *testing.T) {
	t0 := time.Now()
	s := NewStats(t0)
	s.Sample(t0.Add(100*time.Millisecond), 5, 0.8, 0.6)
	s.Sample(t0.Add(900*time.Millisecond), 6, 1.0, 0.8)
	s.Sample(t0.Add(2500*time.Millisecond), 7, 0.5, 0.5)
	s.TaskDone()
	if got := s.seconds[0]; got.Samples != 2 || got.Utilisation < 0.899 || got.Utilisation > 0.901 || got.InUse < 0.699 || got.InUse > 0.701 || got.Running != 6 {
		t.Fatalf("second 0: %+v, want two samples averaging 0.9 allocated and 0.7 in use, 6 running", *got)
	}
	if s.seconds[1].Samples != 0 {
		t.Fatalf("second 1 had %d samples, want none", s.seconds[1].Samples)
	}
	t1 := t0.Add(20 * time.Second)
	s.restart(t1)
	if s.seconds != nil || s.tasksDone != 0 || !s.Start().Equal(t1) {
		t.Fatalf("after the restart: %d seconds, %d tasks done, start %v; want none, none, %v", len(s.seconds), s.tasksDone, s.Start(), t1)
	}
}
