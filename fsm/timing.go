package fsm

// ApplyTimer begins timing the application of one command of the named
// type and returns the function that ends it. The FSM reads no clock
// itself: the timer (internal/metrics.FSMApply) does, to observe, and what
// it measures never reaches the state.
type ApplyTimer func(command string) (done func())

// WithApplyTimer times every command the FSM applies with t, labelled by
// its type's name (CommandName); entries skipped or halted on are not
// timed.
func WithApplyTimer(t ApplyTimer) Option {
	return func(f *FSM) { f.applyTimer = t }
}

// timed wraps run, the application of a command of type t, in the FSM's
// apply timer, if it has one.
func (f *FSM) timed(t MessageType, run func(*txn) any) func(*txn) any {
	if f.applyTimer == nil {
		return run
	}
	name := CommandName(t)
	return func(tx *txn) any {
		defer f.applyTimer(name)()
		return run(tx)
	}
}

// commandNames names each command type, for metrics and logs.
var commandNames = map[MessageType]string{
	QueueConfigApplyType: "queue_config_apply",
	NodeRegisterType:     "node_register",
	NodeStatusType:       "node_status",
	AppSubmitType:        "app_submit",
	AppRegisterType:      "app_register",
	AppFinishType:        "app_finish",
	AskUpdateType:        "ask_update",
	PlanApplyType:        "plan_apply",
	ContainerUpdateType:  "container_update",
	ContainerStopType:    "container_stop",
	PreemptMarkType:      "preempt_mark",
	PromoteType:          "promote",
	RequestType:          "request",
	ACLBootstrapType:     "acl_bootstrap",
	ACLTokenUpsertType:   "acl_token_upsert",
	ACLTokenDeleteType:   "acl_token_delete",
	ACLPolicyUpsertType:  "acl_policy_upsert",
	ACLPolicyDeleteType:  "acl_policy_delete",
	WorkloadKeyType:      "workload_key",
	NodeSecretResetType:  "node_secret_reset",
	NodeDrainType:        "node_drain",
	GCType:               "gc",

	ContainerUpdateBatchType: "container_update_batch",
	AppSubmitUnmanagedType:   "app_submit_unmanaged",
	AppCountersType:          "app_counters",
	AppBlacklistType:         "app_blacklist",
}

// CommandName names command type t in snake_case ("plan_apply"); every type
// this binary does not know is "unknown", so the names form a fixed set.
func CommandName(t MessageType) string {
	if name, ok := commandNames[t]; ok {
		return name
	}
	return "unknown"
}
