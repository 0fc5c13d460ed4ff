package fsm

import (
	"fmt"
	"io"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// FSM is weft's raft.BatchingFSM. Apply and ApplyBatch are called by Raft
// from one goroutine; the Store they publish to is read from anywhere.
type FSM struct {
	logger hclog.Logger
	store  *Store
}

var _ raft.BatchingFSM = (*FSM)(nil)

// New returns an FSM over a store holding the initial state of a new cluster.
func New(logger hclog.Logger) *FSM {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &FSM{logger: logger.Named("fsm"), store: NewStore()}
}

// Store returns the store the FSM publishes to.
func (f *FSM) Store() *Store { return f.store }

// State returns the latest published state.
func (f *FSM) State() *State { return f.store.Current() }

// Apply applies one committed log entry. The result is nil, or the error
// that rejected the command, or a command-specific value.
func (f *FSM) Apply(l *raft.Log) any {
	t := f.store.begin()
	res := f.applyOne(t, l)
	t.commit(l.Index)
	return res
}

// ApplyBatch applies committed entries in order and publishes one new state
// for the whole batch, so that a burst of commands costs one swap.
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	if len(logs) == 0 {
		return out
	}
	t := f.store.begin()
	for i, l := range logs {
		out[i] = f.applyOne(t, l)
	}
	t.commit(logs[len(logs)-1].Index)
	return out
}

func (f *FSM) applyOne(t *txn, l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	if len(l.Data) == 0 {
		panic(fmt.Sprintf("fsm: empty command at index %d", l.Index))
	}
	t.index = l.Index
	msgType := MessageType(l.Data[0])
	if msgType == RequestType {
		var env RequestEnvelope
		mustDecode(l.Index, msgType, l.Data[1:], &env)
		return f.applyRequest(t, l.Index, &env)
	}
	return f.applyCommand(t, l.Index, msgType, l.Data[1:])
}

// applyCommand applies one command of type msgType at index.
func (f *FSM) applyCommand(t *txn, index uint64, msgType MessageType, body []byte) any {
	switch msgType {
	case QueueConfigApplyType:
		var req QueueConfigApplyRequest
		mustDecode(index, msgType, body, &req)
		return errOrNil(t.applyQueueConfig(index, &req))
	case NodeRegisterType:
		var req NodeRegisterRequest
		mustDecode(index, msgType, body, &req)
		return result(t.applyNodeRegister(&req))
	case NodeStatusType:
		var req NodeStatusRequest
		mustDecode(index, msgType, body, &req)
		return errOrNil(t.applyNodeStatus(&req))
	case AppSubmitType:
		var req AppSubmitRequest
		mustDecode(index, msgType, body, &req)
		return result(t.applyAppSubmit(&req))
	case AppRegisterType:
		var req AppRegisterRequest
		mustDecode(index, msgType, body, &req)
		return errOrNil(t.applyAppRegister(&req))
	case AppFinishType:
		var req AppFinishRequest
		mustDecode(index, msgType, body, &req)
		return errOrNil(t.applyAppFinish(&req))
	case AskUpdateType:
		var req AskUpdateRequest
		mustDecode(index, msgType, body, &req)
		return errOrNil(t.applyAskUpdate(&req))
	case PlanApplyType:
		var req PlanApplyRequest
		mustDecode(index, msgType, body, &req)
		return t.applyPlan(&req)
	case ContainerUpdateType:
		var req ContainerUpdateRequest
		mustDecode(index, msgType, body, &req)
		return errOrNil(t.applyContainerUpdate(&req))
	case ContainerStopType:
		var req ContainerStopRequest
		mustDecode(index, msgType, body, &req)
		return errOrNil(t.applyContainerStop(&req))
	case PromoteType:
		var req PromoteRequest
		mustDecode(index, msgType, body, &req)
		return t.applyPromote(&req)
	case PreemptMarkType:
		var req PreemptMarkRequest
		mustDecode(index, msgType, body, &req)
		return errOrNil(t.applyPreemptMark(&req))
	case ACLBootstrapType:
		var req ACLBootstrapRequest
		mustDecode(index, msgType, body, &req)
		return errOrNil(t.applyACLBootstrap(&req))
	case ACLTokenUpsertType:
		var req ACLTokenUpsertRequest
		mustDecode(index, msgType, body, &req)
		return errOrNil(t.applyACLTokenUpsert(&req))
	case ACLTokenDeleteType:
		var req ACLTokenDeleteRequest
		mustDecode(index, msgType, body, &req)
		return errOrNil(t.applyACLTokenDelete(&req))
	case ACLPolicyUpsertType:
		var req ACLPolicyUpsertRequest
		mustDecode(index, msgType, body, &req)
		return errOrNil(t.applyACLPolicyUpsert(&req))
	case ACLPolicyDeleteType:
		var req ACLPolicyDeleteRequest
		mustDecode(index, msgType, body, &req)
		return errOrNil(t.applyACLPolicyDelete(&req))
	}
	if msgType&IgnoreUnknownTypeFlag != 0 {
		f.logger.Warn("ignoring unknown command type", "type", uint8(msgType), "index", index)
		return nil
	}
	panic(fmt.Sprintf("fsm: unknown command type %d at index %d: this binary is older than the cluster's log", msgType, index))
}

// errOrNil keeps a nil error an untyped nil in the apply future.
func errOrNil(err error) any {
	if err != nil {
		return err
	}
	return nil
}

// result returns the error if there is one, else the value.
func result[T any](v T, err error) any {
	if err != nil {
		return err
	}
	return v
}

func mustDecode(index uint64, t MessageType, body []byte, out any) {
	if err := decode(body, out); err != nil {
		panic(fmt.Sprintf("fsm: cannot decode command type %d at index %d: %v", t, index, err))
	}
}

// Snapshot captures the current state. Because states are immutable this is
// O(1); the work happens in Persist, concurrently with further Applies.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	return &snapshot{state: f.store.Current()}, nil
}

// Restore replaces the whole state with the one read from r.
func (f *FSM) Restore(r io.ReadCloser) error {
	defer r.Close()
	s, err := readSnapshot(r)
	if err != nil {
		return fmt.Errorf("restore snapshot: %w", err)
	}
	f.store.replace(s)
	f.logger.Info("restored snapshot", "index", s.index)
	return nil
}
