package scheduler

import (
	"fmt"
	"strings"
)

// AppStates lists every app state, in the order of an app's life.
var AppStates = []AppState{AppSubmitted, AppAccepted, AppRunning, AppFinished, AppFailed, AppKilled}

// ParseAppState reads an app state in any case; "" means any state. An
// unknown state is refused with the list of states.
func ParseAppState(s string) (AppState, error) {
	if s == "" {
		return "", nil
	}
	up := AppState(strings.ToUpper(strings.TrimSpace(s)))
	names := make([]string, len(AppStates))
	for i, st := range AppStates {
		if st == up {
			return st, nil
		}
		names[i] = string(st)
	}
	return "", fmt.Errorf("state %q is not an app state; use one of %s", s, strings.Join(names, ", "))
}
