package federation

import "fmt"

// State is a sub-cluster's state in the federation (SPEC §18).
type State string

// The states of a sub-cluster. A sub-cluster is NEW from its first
// heartbeat until one says it is healthy; RUNNING while its heartbeats say
// so; UNHEALTHY while they come but say otherwise (no ready leader, no
// ready node, a halted state machine); LOST once silent for
// subcluster_timeout; DECOMMISSIONED when an operator retires it. Only a
// RUNNING sub-cluster gets new apps.
const (
	StateNew            State = "NEW"
	StateRunning        State = "RUNNING"
	StateUnhealthy      State = "UNHEALTHY"
	StateLost           State = "LOST"
	StateDecommissioned State = "DECOMMISSIONED"
)

// ParseState parses a state name as the CLI and the HTTP API take it.
func ParseState(s string) (State, error) {
	switch st := State(s); st {
	case StateNew, StateRunning, StateUnhealthy, StateLost, StateDecommissioned:
		return st, nil
	}
	return "", fmt.Errorf("unknown sub-cluster state %q (NEW, RUNNING, UNHEALTHY, LOST or DECOMMISSIONED)", s)
}

// Routable reports whether new apps may be sent to a sub-cluster in state s.
func (s State) Routable() bool { return s == StateRunning }

// Reachable reports whether a router should still call a sub-cluster in
// state s for the apps it holds (lists, status, kill): every state but LOST
// and DECOMMISSIONED.
func (s State) Reachable() bool { return s == StateNew || s == StateRunning || s == StateUnhealthy }

// Event is what happens to a sub-cluster.
type Event int

// The events of a sub-cluster's life.
const (
	// EventHealthy is a heartbeat that says the sub-cluster can take work.
	EventHealthy Event = iota + 1
	// EventUnhealthy is a heartbeat that says it cannot.
	EventUnhealthy
	// EventTimeout is subcluster_timeout without a heartbeat.
	EventTimeout
	// EventDecommission is an operator retiring the sub-cluster.
	EventDecommission
	// EventRecommission is an operator taking a retired one back: it is
	// NEW again until its next healthy heartbeat.
	EventRecommission
)

// Transition returns the state a sub-cluster in state cur moves to on ev.
// A decommissioned sub-cluster stays so whatever it reports, until it is
// recommissioned; a lost one comes back with its next heartbeat.
func Transition(cur State, ev Event) State {
	if cur == StateDecommissioned {
		if ev == EventRecommission {
			return StateNew
		}
		return cur
	}
	switch ev {
	case EventHealthy:
		return StateRunning
	case EventUnhealthy:
		if cur == StateNew {
			return StateNew
		}
		return StateUnhealthy
	case EventTimeout:
		return StateLost
	case EventDecommission:
		return StateDecommissioned
	}
	return cur
}
