package federation

import "testing"

func TestTransition(t *testing.T) {
	all := []State{StateNew, StateRunning, StateUnhealthy, StateLost, StateDecommissioned}
	want := map[Event][]State{ // the state each of all moves to
		EventHealthy:      {StateRunning, StateRunning, StateRunning, StateRunning, StateDecommissioned},
		EventUnhealthy:    {StateNew, StateUnhealthy, StateUnhealthy, StateUnhealthy, StateDecommissioned},
		EventTimeout:      {StateLost, StateLost, StateLost, StateLost, StateDecommissioned},
		EventDecommission: {StateDecommissioned, StateDecommissioned, StateDecommissioned, StateDecommissioned, StateDecommissioned},
		EventRecommission: {StateNew, StateRunning, StateUnhealthy, StateLost, StateNew},
	}
	for ev, to := range want {
		for i, from := range all {
			if got := Transition(from, ev); got != to[i] {
				t.Errorf("Transition(%s, %d) = %s, want %s", from, ev, got, to[i])
			}
		}
	}
	for _, s := range all {
		if s.Routable() != (s == StateRunning) {
			t.Errorf("%s.Routable() = %v", s, s.Routable())
		}
		if got, err := ParseState(string(s)); err != nil || got != s {
			t.Errorf("ParseState(%s) = %s, %v", s, got, err)
		}
	}
	if _, err := ParseState("running"); err == nil {
		t.Error("ParseState accepted a lower-case state")
	}
}
