package scheduler

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
)

// AppState is an application's state (SPEC §8).
type AppState string

// App states.
const (
	AppSubmitted AppState = "SUBMITTED"
	AppAccepted  AppState = "ACCEPTED" // waiting for AM resources (or max_running_apps)
	AppRunning   AppState = "RUNNING"  // an AM attempt has registered
	AppFinished  AppState = "FINISHED"
	AppFailed    AppState = "FAILED"
	AppKilled    AppState = "KILLED"
)

// Terminal reports whether s is a final state.
func (s AppState) Terminal() bool { return s == AppFinished || s == AppFailed || s == AppKilled }

// AMType names an application master. "dshell" is the built-in
// distributed shell.
const AMTypeDShell = "dshell"

// AMTypeUnmanaged is the AM type of an unmanaged AM's app (App.Unmanaged):
// its AM runs in its home sub-cluster, never here, so no AM container is
// placed or launched for it. No user submits it: App.Submit refuses it.
const AMTypeUnmanaged = "unmanaged"

// Defaults and limits of an app spec.
const (
	DefaultAMMemoryMB    = 256
	DefaultAMVcores      = 1
	DefaultMaxAMAttempts = 2
	// MaxAMAttemptsLimit bounds an app's AM attempts (max_am_attempts), and so
	// the attempt numbers any AM, unmanaged ones too, can present.
	MaxAMAttemptsLimit = 100
	MaxNumContainers   = 100000
	MaxAppNameLength   = 256
	// MaxDShellLocality bounds each of a dshell spec's nodes and racks: as
	// many as one Federation.ResolveNodes may name, so that an AMRMProxy
	// can resolve a whole ask in one call.
	MaxDShellLocality = 1024
)

// AppSpec is what a user submits.
type AppSpec struct {
	Name          string    `codec:"name"`
	Queue         string    `codec:"queue"`
	User          string    `codec:"user"`
	Priority      int32     `codec:"priority"`
	AMType        string    `codec:"am_type"`
	AMResources   Resources `codec:"am_resources"`
	MaxAMAttempts int       `codec:"max_am_attempts"`
	DShell        DShell    `codec:"dshell"`
	// MapReduce is the job of the built-in MapReduce AM (AMType
	// "mapreduce"); nil for every other app, so their records are byte for
	// byte what they were before it existed.
	MapReduce *MapReduce `codec:"mapreduce,omitempty"`
	// MaxFailuresPerNode is how many of the app's containers may fail on
	// one node, for the node's sake, before its AM blacklists the node for
	// the app; 0 never blacklists. Unset (nil) means
	// DefaultMaxFailuresPerNode; omitempty keeps the records of apps
	// submitted before it existed byte for byte what they were.
	MaxFailuresPerNode *int `codec:"max_failures_per_node,omitempty"`
}

// FailuresPerNode is the app's max_failures_per_node: its own, else the
// default.
func (s *AppSpec) FailuresPerNode() int {
	if s.MaxFailuresPerNode == nil {
		return DefaultMaxFailuresPerNode
	}
	return *s.MaxFailuresPerNode
}

// DShell is the work of the built-in distributed-shell AM: run Command in
// NumContainers containers of Resources and ExecutionType, on Nodes and
// Racks when it names some (see Locality).
type DShell struct {
	NumContainers                  int               `codec:"num_containers"`
	Resources                      Resources         `codec:"resources"`
	ExecutionType                  ExecutionType     `codec:"execution_type"`
	Command                        []string          `codec:"command"`
	Env                            map[string]string `codec:"env"`
	PromoteOpportunisticAfterStart bool              `codec:"promote_opportunistic_after_start"`
	EnforceExecutionType           bool              `codec:"enforce_execution_type"`
	// Nodes and Racks are where the containers should run; neither means
	// anywhere. omitempty keeps the records of apps without them (and so
	// snapshots) byte for byte what they were before the fields existed.
	Nodes []string `codec:"nodes,omitempty"`
	Racks []string `codec:"racks,omitempty"`
	// RelaxLocality false holds the containers to Nodes and Racks. Unset
	// (nil) means true, as YARN's relax_locality defaults to: delay
	// scheduling may then move them to the nodes' racks and later anywhere.
	// It is a pointer so that a spec that leaves it out, and every app
	// recorded before it existed, relaxes instead of turning strict.
	RelaxLocality *bool `codec:"relax_locality,omitempty"`
	// ExpectedDuration is how long each container is expected to run,
	// which the AM puts on its ask (0: not said).
	ExpectedDuration time.Duration `codec:"expected_duration,omitempty"`
}

// IsZero reports whether d says nothing: the dshell part of an app of
// another AM type.
func (d *DShell) IsZero() bool {
	return d.NumContainers == 0 && len(d.Command) == 0 && len(d.Env) == 0 && len(d.Nodes) == 0 && len(d.Racks) == 0 &&
		d.RelaxLocality == nil && !d.PromoteOpportunisticAfterStart && !d.EnforceExecutionType && d.ExpectedDuration == 0
}

// Locality is the locality of the ask for the containers.
func (d *DShell) Locality() Locality {
	return Locality{Nodes: d.Nodes, Racks: d.Racks, Relax: d.RelaxLocality == nil || *d.RelaxLocality}
}

// SetDefaults fills unset fields with the SPEC defaults.
func (s *AppSpec) SetDefaults() {
	if s.AMType == "" {
		s.AMType = AMTypeDShell
	}
	if s.AMResources.IsZero() {
		s.AMResources = Resources{MemoryMB: DefaultAMMemoryMB, Vcores: DefaultAMVcores}
	}
	if s.MaxAMAttempts == 0 {
		s.MaxAMAttempts = DefaultMaxAMAttempts
	}
	if s.AMType == AMTypeMapReduce {
		if s.MapReduce != nil {
			s.MapReduce.setDefaults()
		}
		if s.Name == "" {
			s.Name = "mapreduce"
		}
		return
	}
	if s.DShell.ExecutionType == "" {
		s.DShell.ExecutionType = Guaranteed
	}
	if s.DShell.Resources.IsZero() {
		s.DShell.Resources = Resources{MemoryMB: 128, Vcores: 1}
	}
	if s.Name == "" && len(s.DShell.Command) > 0 {
		s.Name = s.DShell.Command[0]
	}
}

// Validate checks a spec (after SetDefaults) and names the first bad field.
func (s *AppSpec) Validate() error {
	var errs []string
	add := func(format string, a ...any) { errs = append(errs, fmt.Sprintf(format, a...)) }
	if len(s.Name) > MaxAppNameLength {
		add("name: longer than %d characters", MaxAppNameLength)
	}
	if s.AMType != AMTypeDShell && s.AMType != AMTypeMapReduce {
		add("am_type: %q is not a known application master (want %q or %q)", s.AMType, AMTypeDShell, AMTypeMapReduce)
	}
	if err := s.AMResources.Validate(); err != nil {
		add("am_resources: %v", err)
	} else if s.AMResources.MemoryMB <= 0 || s.AMResources.Vcores <= 0 {
		add("am_resources: memory_mb and vcores must be positive")
	}
	if s.MaxAMAttempts < 1 || s.MaxAMAttempts > MaxAMAttemptsLimit {
		add("max_am_attempts: must be between 1 and %d, not %d", MaxAMAttemptsLimit, s.MaxAMAttempts)
	}
	if n := s.FailuresPerNode(); n < 0 || n > MaxFailuresPerNodeLimit {
		add("max_failures_per_node: must be between 0 (never blacklist) and %d, not %d", MaxFailuresPerNodeLimit, n)
	}
	if s.AMType == AMTypeMapReduce {
		switch {
		case s.MapReduce == nil:
			add("mapreduce: a mapreduce app needs its job (splits, map, reduce, reducers, output)")
		case !s.DShell.IsZero():
			add("dshell: a mapreduce app runs no shell command; give the job in mapreduce")
		default:
			if err := s.MapReduce.Validate(); err != nil {
				add("%v", err)
			}
		}
		if len(errs) > 0 {
			return errors.New(strings.Join(errs, "; "))
		}
		return nil
	}
	if s.MapReduce != nil {
		add("mapreduce: only a mapreduce app (am_type %q) has a job", AMTypeMapReduce)
	}
	d := s.DShell
	if d.NumContainers < 1 || d.NumContainers > MaxNumContainers {
		add("num_containers: must be between 1 and %d, not %d", MaxNumContainers, d.NumContainers)
	}
	if err := d.Resources.Validate(); err != nil {
		add("resources: %v", err)
	} else if d.Resources.MemoryMB <= 0 || d.Resources.Vcores <= 0 {
		add("resources: memory_mb and vcores must be positive")
	}
	if !d.ExecutionType.Valid() {
		add("container_type: must be GUARANTEED or OPPORTUNISTIC, not %q", d.ExecutionType)
	}
	if len(d.Command) == 0 || d.Command[0] == "" {
		add("command: give the command to run in each container")
	}
	if err := d.validateLocality(); err != nil {
		add("%v", err)
	}
	if d.ExpectedDuration < 0 || d.ExpectedDuration > MaxExpectedDuration {
		add("dshell.expected_duration: must be between 0 and %s, not %s", MaxExpectedDuration, d.ExpectedDuration)
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// validateLocality checks Nodes, Racks and RelaxLocality and names the
// first bad entry.
func (d *DShell) validateLocality() error {
	for _, l := range []struct {
		field string
		names []string
		check func(string) error
	}{{"dshell.nodes", d.Nodes, ValidateNodeID}, {"dshell.racks", d.Racks, validateRack}} {
		if len(l.names) > MaxDShellLocality {
			return fmt.Errorf("%s: %d entries; at most %d", l.field, len(l.names), MaxDShellLocality)
		}
		for i, name := range l.names {
			if err := l.check(name); err != nil {
				return fmt.Errorf("%s[%d]: %w", l.field, i, err)
			}
		}
	}
	if !d.Locality().Relax && len(d.Nodes)+len(d.Racks) == 0 {
		// YARN refuses this too: strict with nowhere named would mean
		// anywhere to the scheduler, which is not what was asked.
		return errors.New("dshell.relax_locality: false needs nodes or racks to hold the containers to")
	}
	return nil
}

// validateRack checks a rack name in a locality. Agents take any rack
// ("/default-rack", "/dc1/r7"), so only what no rack can be is refused:
// nothing, more than MaxIDLength bytes, or a control character, which
// would break the one-line errors and logs that quote it.
func validateRack(rack string) error {
	if rack == "" || len(rack) > MaxIDLength {
		return fmt.Errorf("rack %.64q must be 1 to %d characters", rack, MaxIDLength)
	}
	for _, c := range rack {
		if unicode.IsControl(c) {
			return fmt.Errorf("rack %.64q holds a control character", rack)
		}
	}
	return nil
}

// Locality constrains where an ask may be placed.
type Locality struct {
	Nodes []string `codec:"nodes"`
	Racks []string `codec:"racks"`
	Relax bool     `codec:"relax"`
}

// Ask is an AM's request for containers (SPEC §8). Count is how many
// containers of this ask are still wanted.
type Ask struct {
	AskID                uint64        `codec:"ask_id"`
	Count                int           `codec:"count"`
	Resources            Resources     `codec:"resources"`
	ExecutionType        ExecutionType `codec:"execution_type"`
	EnforceExecutionType bool          `codec:"enforce_execution_type"`
	Priority             int32         `codec:"priority"`
	Locality             Locality      `codec:"locality"`
	// Feeders, on a reduce ask, are the map outputs it will fetch: the
	// scheduler places it near their center of gravity (cogrs.go).
	Feeders []Feeder `codec:"feeders,omitempty"`
	// ExpectedDuration is how long the AM expects each container to run
	// (0: it does not say): a node whose queue runs shortest first orders
	// by it. It is the AM's word; max_queue_wait bounds what a wrong one
	// costs other apps.
	ExpectedDuration time.Duration `codec:"expected_duration,omitempty"`
}

// MaxExpectedDuration bounds an ask's expected_duration.
const MaxExpectedDuration = 7 * 24 * time.Hour

// AMAskID is the ask ID of an app's AM container.
const AMAskID = 0

// Validate checks an ask from an AM and names the bad field. An ask with an
// empty execution type must be given one (guaranteed) before.
func (a *Ask) Validate() error {
	switch {
	case a.AskID == AMAskID:
		return fmt.Errorf("ask_id 0 is reserved for the AM container")
	case a.Count < 0:
		return fmt.Errorf("ask %d: count must not be negative", a.AskID)
	case !a.ExecutionType.Valid():
		return fmt.Errorf("ask %d: execution_type must be GUARANTEED or OPPORTUNISTIC, not %q", a.AskID, a.ExecutionType)
	case a.ExpectedDuration < 0 || a.ExpectedDuration > MaxExpectedDuration:
		return fmt.Errorf("ask %d: expected_duration must be between 0 and %s, not %s", a.AskID, MaxExpectedDuration, a.ExpectedDuration)
	}
	if err := ValidateContainerResources(a.Resources); err != nil {
		return fmt.Errorf("ask %d: %w", a.AskID, err)
	}
	return a.validateFeeders()
}

// ValidateContainerResources checks a container's size: no negative or
// badly named resource, and some memory and vcores, which every container
// needs.
func ValidateContainerResources(r Resources) error {
	if err := r.Validate(); err != nil {
		return fmt.Errorf("resources: %w", err)
	}
	if r.MemoryMB <= 0 || r.Vcores <= 0 {
		return fmt.Errorf("resources: memory_mb and vcores must be positive")
	}
	return nil
}

// Attempt is one run of an app's AM.
type Attempt struct {
	Attempt     int    `codec:"attempt"`
	ContainerID string `codec:"container_id"`
	NodeID      string `codec:"node_id"`
	StartedAt   int64  `codec:"started_at"`
	FinishedAt  int64  `codec:"finished_at"`
	Diagnostics string `codec:"diagnostics"`
	// NotCounted marks an attempt whose AM container was taken away (its
	// node stopped, went down or was drained; it was preempted or never
	// started in time: ExitReason.Retryable) rather than failing: it does
	// not count against max_am_attempts, as YARN counts no attempt whose
	// AM container was preempted or aborted with its node.
	NotCounted bool `codec:"not_counted,omitempty"`
}

// App is an application as the servers hold it.
type App struct {
	ID          string   `codec:"id"`
	Spec        AppSpec  `codec:"spec"`
	Queue       string   `codec:"queue"` // resolved leaf path
	State       AppState `codec:"state"`
	Diagnostics string   `codec:"diagnostics"`
	SubmittedAt int64    `codec:"submitted_at"`
	FinishedAt  int64    `codec:"finished_at"`
	// Attempts lists AM attempts, the current one last.
	Attempts []Attempt `codec:"attempts"`
	// AMPending is true while the current attempt needs an AM container.
	AMPending bool `codec:"am_pending"`
	// Asks are the current attempt's outstanding guaranteed asks.
	Asks []Ask `codec:"asks"`
	// Used is the resources of the app's live guaranteed containers, and
	// Live their number; the FSM keeps both.
	Used Resources `codec:"used"`
	Live int       `codec:"live"`
	// Preemptions records the app's containers taken by preemption, the
	// most recent MaxPreemptionRecords.
	Preemptions []PreemptionRecord `codec:"preemptions"`
	// Unmanaged marks an app whose AM runs in another sub-cluster of a
	// federation (SPEC §18): its record here has no AM container, and the
	// AMRMProxy of the AM's node asks for it. Nil for every other app.
	Unmanaged *Unmanaged `codec:"unmanaged,omitempty"`
	// Counters are the figures the app's AM reported last (SPEC §19),
	// nil until it reports any; an ended app keeps its final ones. A
	// stored app's map is replaced whole, never changed in place.
	Counters Counters `codec:"counters,omitempty"`
	// UID is the Unix uid the servers gave the app's containers from their
	// dynamic uid range: no other live app has it, so containers of
	// different apps run apart even where their users have no accounts.
	// 0: none (an app of a cluster without a range, or older than it).
	UID uint32 `codec:"uid,omitempty"`
	// Blacklist is the current AM attempt's node blacklist (blacklist.go):
	// sorted, at most MaxBlacklistedNodes, emptied when a new attempt
	// starts. A stored app's slice is replaced whole, never changed in
	// place; omitempty keeps the records of apps without one as they were.
	Blacklist []string `codec:"blacklist,omitempty"`
	// Reservations are the nodes the app holds reserved for containers
	// that do not fit yet (capacity queues: reservation.go); each node
	// records the same. At most MaxReservationsPerApp; a stored app's
	// slice is replaced whole, never changed in place.
	Reservations []Reservation `codec:"reservations,omitempty"`
	CreateIndex  uint64        `codec:"create_index"`
	ModifyIndex  uint64        `codec:"modify_index"`
}

// Unmanaged is what a sub-cluster holds of an app that spans into it from
// its home (an unmanaged AM, SPEC §18). The app's ID is the federation's
// (app-fN); its containers' IDs begin "Subcluster." so that they are
// unique federation-wide, and its attempts follow the home's AM attempts.
type Unmanaged struct {
	// Home is the sub-cluster whose AM the app's record here serves.
	Home string `codec:"home"`
	// Subcluster is this sub-cluster's ID, as the routers name it.
	Subcluster string `codec:"subcluster"`
}

// Copy returns a copy of a whose slices may be modified.
func (a *App) Copy() *App {
	n := *a
	n.Attempts = append([]Attempt(nil), a.Attempts...)
	n.Asks = append([]Ask(nil), a.Asks...)
	n.Preemptions = append([]PreemptionRecord(nil), a.Preemptions...)
	return &n
}

// MaxPreemptionRecords bounds App.Preemptions.
const MaxPreemptionRecords = 100

// PreemptionRecord says which container was taken from an app, why, and
// for whom (SPEC §11).
type PreemptionRecord struct {
	ContainerID string `codec:"container_id"`
	NodeID      string `codec:"node_id"`
	Reason      string `codec:"reason"`
	ForApp      string `codec:"for_app"`
	At          int64  `codec:"at"`
}

// CountedAttempts returns how many of the app's AM attempts count against
// max_am_attempts: all but those whose AM container was taken away.
func (a *App) CountedAttempts() int {
	n := 0
	for _, at := range a.Attempts {
		if !at.NotCounted {
			n++
		}
	}
	return n
}

// CurrentAttempt returns the number of the current AM attempt (0 before the
// first AM container is placed).
func (a *App) CurrentAttempt() int {
	if len(a.Attempts) == 0 {
		return 0
	}
	return a.Attempts[len(a.Attempts)-1].Attempt
}

// Pending returns the resources the app still asks for: its AM container
// while that is unplaced, plus its outstanding guaranteed asks.
func (a *App) Pending() Resources {
	var r Resources
	if a.State.Terminal() {
		return r
	}
	if a.AMPending {
		r = r.Add(a.Spec.AMResources)
	}
	for _, ask := range a.Asks {
		r = r.Add(ask.Resources.Scale(int64(ask.Count)))
	}
	return r
}
