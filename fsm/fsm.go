package fsm

import (
	"fmt"
	"io"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// FSM is weft's raft.BatchingFSM. Apply and ApplyBatch are called by Raft
// from one goroutine; the Store they publish to is read from anywhere.
type FSM struct {
	logger hclog.Logger
	store  *Store

	// skipIndex is the one index whose entry is skipped if it cannot be
	// applied (WithSkipIndex); 0 for none.
	skipIndex uint64
	// applyTimer, if set, times each command applied (WithApplyTimer).
	applyTimer ApplyTimer
	// halt is set, and haltCh closed, when an entry cannot be applied.
	halt   atomic.Pointer[HaltError]
	haltCh chan struct{}
}

var _ raft.BatchingFSM = (*FSM)(nil)

// New returns an FSM over a store holding the initial state of a new cluster.
func New(logger hclog.Logger, opts ...Option) *FSM {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	f := &FSM{logger: logger.Named("fsm"), store: NewStore(), haltCh: make(chan struct{})}
	for _, o := range opts {
		o(f)
	}
	return f
}

// Store returns the store the FSM publishes to.
func (f *FSM) Store() *Store { return f.store }

// State returns the latest published state.
func (f *FSM) State() *State { return f.store.Current() }

// Apply applies one committed log entry. The result is nil, or the error
// that rejected the command, or a command-specific value, or a *HaltError
// if the FSM has halted (see ApplyBatch).
func (f *FSM) Apply(l *raft.Log) any {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch applies committed entries in order and publishes one new state
// for the whole batch, so that a burst of commands costs one swap. An entry
// this binary cannot apply halts the FSM before it changes anything: the
// entries before it are applied and published, it and every later entry
// (in this batch and every later one) get the *HaltError and change
// nothing, so every server running the same binary stops at the same state.
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	out := make([]any, len(logs))
	if h := f.halt.Load(); h != nil {
		for i := range out {
			out[i] = h
		}
		return out
	}
	t := f.store.begin()
	applied := 0
	for i, l := range logs {
		res, h := f.applyOne(t, l)
		if h != nil {
			f.setHalt(h)
			for j := i; j < len(logs); j++ {
				out[j] = h
			}
			break
		}
		out[i] = res
		applied++
	}
	if applied > 0 {
		t.commit(logs[applied-1].Index)
	}
	return out
}

// applyOne applies one entry to t, or returns why it cannot be applied,
// having changed nothing.
func (f *FSM) applyOne(t *txn, l *raft.Log) (any, *HaltError) {
	if l.Type != raft.LogCommand {
		return nil, nil
	}
	run, h := f.decodeEntry(l)
	if h != nil {
		if l.Index != f.skipIndex {
			return nil, h
		}
		f.logger.Error("SKIPPED the committed entry at the index raft_skip_index names: it is not applied, on this server or (if they were all started alike) any other",
			"index", l.Index, "type", uint8(h.Type), "reason", h.Reason)
		return nil, nil
	}
	if l.Index == f.skipIndex {
		f.logger.Warn("raft_skip_index names an entry this server can apply: it was applied, not skipped", "index", l.Index)
	}
	t.index = l.Index
	return run(t), nil
}

// decodeEntry decodes a committed command into a function that applies it.
// Every decoding happens here, before anything changes, so that an entry
// which cannot be applied leaves no trace.
func (f *FSM) decodeEntry(l *raft.Log) (func(*txn) any, *HaltError) {
	if len(l.Data) == 0 {
		return nil, &HaltError{Index: l.Index, Reason: "empty command"}
	}
	msgType, body := MessageType(l.Data[0]), l.Data[1:]
	if msgType != RequestType {
		run, err := f.decodeCommand(l.Index, msgType, body)
		if err != nil {
			return nil, haltFor(l.Index, msgType, err, false)
		}
		return f.timed(msgType, run), nil
	}
	env := new(RequestEnvelope)
	if err := decode(body, env); err != nil {
		return nil, haltFor(l.Index, msgType, err, false)
	}
	var inner func(*txn) any
	if env.ID != "" && env.Type != RequestType { // else applyRequest rejects it
		var err error
		if inner, err = f.decodeCommand(l.Index, env.Type, env.Body); err != nil {
			return nil, haltFor(l.Index, env.Type, err, true)
		}
	}
	return f.timed(env.Type, func(t *txn) any { return f.applyRequest(t, l.Index, env, inner) }), nil
}

// decodeCommand decodes a command of type msgType, applied at index, into a
// function that applies it. A type this binary does not know is ignored
// when it carries IgnoreUnknownTypeFlag, else errUnknownType.
func (f *FSM) decodeCommand(index uint64, msgType MessageType, body []byte) (func(*txn) any, error) {
	switch msgType {
	case QueueConfigApplyType:
		return bind(body, func(t *txn, req *QueueConfigApplyRequest) any { return errOrNil(t.applyQueueConfig(index, req)) })
	case NodeRegisterType:
		return bind(body, func(t *txn, req *NodeRegisterRequest) any { return result(t.applyNodeRegister(req)) })
	case NodeStatusType:
		return bind(body, func(t *txn, req *NodeStatusRequest) any { return errOrNil(t.applyNodeStatus(req)) })
	case AppSubmitType:
		return bind(body, func(t *txn, req *AppSubmitRequest) any { return result(t.applyAppSubmit(req)) })
	case AppRegisterType:
		return bind(body, func(t *txn, req *AppRegisterRequest) any { return errOrNil(t.applyAppRegister(req)) })
	case AppFinishType:
		return bind(body, func(t *txn, req *AppFinishRequest) any { return errOrNil(t.applyAppFinish(req)) })
	case AskUpdateType:
		return bind(body, func(t *txn, req *AskUpdateRequest) any { return errOrNil(t.applyAskUpdate(req)) })
	case PlanApplyType:
		return bind(body, func(t *txn, req *PlanApplyRequest) any { return t.applyPlan(req) })
	case ContainerUpdateType:
		return bind(body, func(t *txn, req *ContainerUpdateRequest) any { return errOrNil(t.applyContainerUpdate(req)) })
	case ContainerUpdateBatchType:
		return bind(body, func(t *txn, req *ContainerUpdateBatchRequest) any { return t.applyContainerUpdateBatch(req) })
	case ContainerStopType:
		return bind(body, func(t *txn, req *ContainerStopRequest) any { return errOrNil(t.applyContainerStop(req)) })
	case PromoteType:
		return bind(body, func(t *txn, req *PromoteRequest) any { return t.applyPromote(req) })
	case PreemptMarkType:
		return bind(body, func(t *txn, req *PreemptMarkRequest) any { return errOrNil(t.applyPreemptMark(req)) })
	case ACLBootstrapType:
		return bind(body, func(t *txn, req *ACLBootstrapRequest) any { return errOrNil(t.applyACLBootstrap(req)) })
	case ACLTokenUpsertType:
		return bind(body, func(t *txn, req *ACLTokenUpsertRequest) any { return errOrNil(t.applyACLTokenUpsert(req)) })
	case ACLTokenDeleteType:
		return bind(body, func(t *txn, req *ACLTokenDeleteRequest) any { return errOrNil(t.applyACLTokenDelete(req)) })
	case ACLPolicyUpsertType:
		return bind(body, func(t *txn, req *ACLPolicyUpsertRequest) any { return errOrNil(t.applyACLPolicyUpsert(req)) })
	case ACLPolicyDeleteType:
		return bind(body, func(t *txn, req *ACLPolicyDeleteRequest) any { return errOrNil(t.applyACLPolicyDelete(req)) })
	case WorkloadKeyType:
		return bind(body, func(t *txn, req *WorkloadKeyRequest) any { return result(t.applyWorkloadKey(req)) })
	case NodeSecretResetType:
		return bind(body, func(t *txn, req *NodeSecretResetRequest) any { return errOrNil(t.applyNodeSecretReset(req)) })
	case NodeDrainType:
		return bind(body, func(t *txn, req *NodeDrainRequest) any { return errOrNil(t.applyNodeDrain(req)) })
	case GCType:
		return bind(body, func(t *txn, req *GCRequest) any { return t.applyGC(req) })
	case AppSubmitUnmanagedType:
		return bind(body, func(t *txn, req *AppSubmitUnmanagedRequest) any { return errOrNil(t.applyAppSubmitUnmanaged(req)) })
	case AppCountersType:
		return bind(body, func(t *txn, req *AppCountersRequest) any { return errOrNil(t.applyAppCounters(req)) })
	case AppBlacklistType:
		return bind(body, func(t *txn, req *AppBlacklistRequest) any { return errOrNil(t.applyAppBlacklist(req)) })
	}
	if msgType&IgnoreUnknownTypeFlag != 0 {
		f.logger.Warn("ignoring unknown command type", "type", uint8(msgType), "index", index)
		return func(*txn) any { return nil }, nil
	}
	return nil, errUnknownType
}

// bind decodes body as a T and returns apply bound to it.
func bind[T any](body []byte, apply func(*txn, *T) any) (func(*txn) any, error) {
	req := new(T)
	if err := decode(body, req); err != nil {
		return nil, err
	}
	return func(t *txn) any { return apply(t, req) }, nil
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

// Snapshot captures the current state. Because states are immutable this is
// O(1); the work happens in Persist, concurrently with further Applies. A
// halted FSM refuses: Raft would label the snapshot with an index past the
// entries it did not apply, and compact them away.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	if h := f.halt.Load(); h != nil {
		return nil, fmt.Errorf("no snapshot: %w", h)
	}
	return &snapshot{state: f.store.Current()}, nil
}

// Restore replaces the whole state with the one read from r. A snapshot
// that cannot be read is an error and changes nothing, so Raft refuses it.
// A halted FSM refuses every snapshot: it stays stopped where it stopped.
// It logs how long reading took and how big the state is (weft sim reads
// the line to report restart times).
func (f *FSM) Restore(r io.ReadCloser) error {
	defer r.Close()
	if h := f.halt.Load(); h != nil {
		return fmt.Errorf("restore snapshot: %w", h)
	}
	began := time.Now()
	resume := pauseGC()
	s, err := readSnapshotSafely(r)
	resume()
	if err != nil {
		return fmt.Errorf("restore snapshot: %w", err)
	}
	f.store.replace(s)
	f.logger.Info("restored snapshot", "index", s.index, "duration_ms", time.Since(began).Milliseconds(),
		"nodes", s.nodes.Len(), "apps", s.apps.Len(), "containers", s.containers.Len())
	return nil
}

// gcPaused counts the restores under way; while there is one, the
// garbage collector is off (pauseGC).
var gcPaused struct {
	sync.Mutex
	n       int
	percent int // the setting to return to
}

// pauseGC turns the garbage collector off until resume is called (and no
// other restore is under way). A restore allocates a whole state, nearly
// all of which stays live (at 1 M containers 2.3 GB allocated, 1.8 GB
// live): each collection while the heap grows marks it all again for
// little garbage, ~a quarter of the restore's CPU. Off, the heap peaks
// ~11% higher, and the collection after the restore marks it once. A
// memory limit (GOMEMLIMIT) still holds: the runtime collects when the
// heap reaches it.
func pauseGC() (resume func()) {
	gcPaused.Lock()
	defer gcPaused.Unlock()
	if gcPaused.n == 0 {
		gcPaused.percent = debug.SetGCPercent(-1)
	}
	gcPaused.n++
	return func() {
		gcPaused.Lock()
		defer gcPaused.Unlock()
		if gcPaused.n--; gcPaused.n == 0 {
			debug.SetGCPercent(gcPaused.percent)
		}
	}
}

// readSnapshotSafely is readSnapshot, with a panic on content it did not
// foresee turned into an error: reading builds a fresh state and touches
// nothing else, so there is nothing to undo, and Raft refusing the
// snapshot beats a server that crashes on every start.
func readSnapshotSafely(r io.Reader) (s *State, err error) {
	defer func() {
		if p := recover(); p != nil {
			s, err = nil, fmt.Errorf("snapshot content this binary cannot read: %v", p)
		}
	}()
	return readSnapshot(r)
}
