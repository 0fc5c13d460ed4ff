package scheduler

import (
	"fmt"
	"strings"
)

// CompareIDs orders IDs the way a person reads them: runs of digits compare
// by their numeric value, everything else byte by byte, so app-9 comes
// before app-10 and c-7-2 before c-7-10. It returns -1, 0 or 1. Every list
// of apps, containers or nodes weft shows is sorted with it, on servers
// and in the command line alike.
func CompareIDs(a, b string) int {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		ca, cb := a[i], b[j]
		if isDigit(ca) && isDigit(cb) {
			si, sj := i, j
			for i < len(a) && isDigit(a[i]) {
				i++
			}
			for j < len(b) && isDigit(b[j]) {
				j++
			}
			// Leading zeros do not change the value; a longer run of
			// significant digits is the larger number.
			na, nb := strings.TrimLeft(a[si:i], "0"), strings.TrimLeft(b[sj:j], "0")
			if len(na) != len(nb) {
				return cmpInt(len(na), len(nb))
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			if c := cmpInt(i-si, j-sj); c != 0 {
				return c // "007" after "7": equal values, a total order still
			}
			continue
		}
		if ca != cb {
			return cmpInt(int(ca), int(cb))
		}
		i, j = i+1, j+1
	}
	return cmpInt(len(a)-i, len(b)-j)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ContainerStates lists every container state, in the order of a
// container's life.
var ContainerStates = []ContainerState{ContainerAllocated, ContainerQueued, ContainerRunning, ContainerPaused, ContainerCompleted}

// ParseContainerState reads a container state in any case; "" means any
// state. An unknown state is refused with the list of states.
func ParseContainerState(s string) (ContainerState, error) {
	return parseState(s, "a container state", ContainerStates)
}

// NodeStatuses lists every node status.
var NodeStatuses = []NodeStatus{NodeReady, NodeDraining, NodeDown}

// ParseNodeStatus reads a node status in any case; "" means any status. An
// unknown status is refused with the list of statuses.
func ParseNodeStatus(s string) (NodeStatus, error) {
	return parseState(s, "a node state", NodeStatuses)
}

func parseState[T ~string](s, what string, all []T) (T, error) {
	if s == "" {
		return "", nil
	}
	up := T(strings.ToUpper(strings.TrimSpace(s)))
	names := make([]string, len(all))
	for i, st := range all {
		if st == up {
			return st, nil
		}
		names[i] = string(st)
	}
	return "", fmt.Errorf("state %q is not %s; use one of %s", s, what, strings.Join(names, ", "))
}
