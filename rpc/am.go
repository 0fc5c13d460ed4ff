package rpc

import "github.com/weft-sched/weft/scheduler"

// AMRegisterRequest registers an AM attempt (AM.Register). The AMRMProxy on
// the AM's node relays it to the servers.
type AMRegisterRequest struct {
	RequestHeader
	AppID   string `codec:"app_id"`
	Attempt int    `codec:"attempt"`
	Token   string `codec:"token"`
}

// AMRegisterResponse gives the AM its app's spec and the cluster's size.
type AMRegisterResponse struct {
	Spec            scheduler.AppSpec   `codec:"spec"`
	Queue           string              `codec:"queue"`
	ClusterCapacity scheduler.Resources `codec:"cluster_capacity"`
	// MaxContainer is the largest container any node could hold.
	MaxContainer scheduler.Resources `codec:"max_container"`
	Index        uint64              `codec:"index"`
}

// AMAllocateRequest is an AM's heartbeat (AM.Allocate): its outstanding
// asks (Count is what it still wants), containers it releases, opportunistic
// containers it wants promoted, and its progress. MinQueryIndex is the
// Index of the AM's previous response: the call returns what changed
// since then, blocking up to MaxWait if nothing has.
type AMAllocateRequest struct {
	RequestHeader
	AppID      string          `codec:"app_id"`
	Attempt    int             `codec:"attempt"`
	Token      string          `codec:"token"`
	Asks       []scheduler.Ask `codec:"asks"`
	Releases   []string        `codec:"releases"`
	Promotions []string        `codec:"promotions"`
	Progress   float32         `codec:"progress"`
	// Counters are the app's figures as the AM has them now (SPEC §19); the
	// servers keep the latest with the app. nil leaves them as they are.
	Counters scheduler.Counters `codec:"counters,omitempty"`
	// BlacklistAdditions are nodes the AM adds to its attempt's node
	// blacklist, BlacklistRemovals nodes it takes off (YARN's
	// ResourceBlacklistRequest): none of the app's containers is placed on
	// a blacklisted node while the blacklist is in force (see
	// AMAllocateResponse.BlacklistIgnored). The change applies before the
	// call's asks; at most scheduler.MaxBlacklistedNodes nodes are listed.
	BlacklistAdditions []string `codec:"blacklist_additions,omitempty"`
	BlacklistRemovals  []string `codec:"blacklist_removals,omitempty"`
}

// AMAllocateResponse carries containers allocated and completed since the
// request's MinQueryIndex.
type AMAllocateResponse struct {
	Index     uint64          `codec:"index"`
	AppState  string          `codec:"app_state"`
	Allocated []ContainerInfo `codec:"allocated"`
	Completed []ContainerInfo `codec:"completed"`
	// PreemptionWarnings lists containers that will be killed after the
	// preemption wait.
	PreemptionWarnings []string `codec:"preemption_warnings"`
	// Paused lists the attempt's opportunistic containers that an agent
	// paused (for a guaranteed arrival, or its measured use) since the
	// AM's MinQueryIndex and that are still paused: their work is kept and
	// goes on when room frees, or they complete (evicted) after the node's
	// max_pause. A resume is not announced.
	Paused []string `codec:"paused,omitempty"`
	// Promoted lists containers of the request's promotions that are now
	// guaranteed; PromotionFailures those that are not, and why.
	Promoted          []string           `codec:"promoted"`
	PromotionFailures []PromotionFailure `codec:"promotion_failures"`
	// Partial is set when the AMRMProxy answered alone because no server
	// could be reached: Allocated holds only what it allocated itself, and
	// Index did not advance, so the next call brings what was missed. The
	// proxy relays the request's releases and promotions later.
	Partial bool `codec:"partial"`
	// AMToken, when set, is a renewed AM token for the attempt: the AM
	// uses it from now on (the servers renew a token halfway through its
	// life, and after a key rotation).
	AMToken string `codec:"am_token"`
	// Blacklist is the attempt's node blacklist as the servers hold it;
	// BlacklistIgnored says it is not in force because it names at least
	// scheduler.BlacklistIgnorePercent of the READY nodes.
	Blacklist        []string `codec:"blacklist,omitempty"`
	BlacklistIgnored bool     `codec:"blacklist_ignored,omitempty"`
	// Headroom, for an app in a capacity queue, is what its user may still
	// be given there (YARN's headroom: the least of what the user limit,
	// the queue's max capacity and the cluster's free room leave); nil in
	// other queues.
	Headroom *scheduler.Resources `codec:"headroom,omitempty"`
}

// PromotionFailure is a promotion that was not granted. Retryable ones
// (the container is not running or not recorded yet; no room now) may be
// asked for again.
type PromotionFailure struct {
	ID        string `codec:"id"`
	Reason    string `codec:"reason"`
	Retryable bool   `codec:"retryable"`
}

// AMFinishRequest ends the app (AM.Finish): FINISHED or FAILED; an
// unmanaged AM's app KILLED too (its home app was killed).
type AMFinishRequest struct {
	RequestHeader
	AppID       string `codec:"app_id"`
	Attempt     int    `codec:"attempt"`
	Token       string `codec:"token"`
	FinalState  string `codec:"final_state"`
	Diagnostics string `codec:"diagnostics"`
	// Counters are the app's final figures; nil leaves them as they are.
	Counters scheduler.Counters `codec:"counters,omitempty"`
}
