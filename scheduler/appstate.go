package scheduler

// AppStates lists every app state, in the order of an app's life.
var AppStates = []AppState{AppSubmitted, AppAccepted, AppRunning, AppFinished, AppFailed, AppKilled}

// ParseAppState reads an app state in any case; "" means any state. An
// unknown state is refused with the list of states.
func ParseAppState(s string) (AppState, error) {
	return parseState(s, "an app state", AppStates)
}
