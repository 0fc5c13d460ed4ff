package fsm

import (
	"bytes"
	"fmt"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/weft-sched/weft/scheduler"
)

// MessageType is the leading byte of every Raft command.
type MessageType uint8

// Command types. Values are part of the on-disk log format: never reuse or
// renumber one.
const (
	QueueConfigApplyType MessageType = 1
	NodeRegisterType     MessageType = 2
	NodeStatusType       MessageType = 3
	AppSubmitType        MessageType = 4
	AppRegisterType      MessageType = 5
	AppFinishType        MessageType = 6
	AskUpdateType        MessageType = 7
	PlanApplyType        MessageType = 8
	ContainerUpdateType  MessageType = 9
	ContainerStopType    MessageType = 10
	PreemptMarkType      MessageType = 11
	PromoteType          MessageType = 12
	RequestType          MessageType = 13 // a RequestEnvelope: a client write with its request ID
	ACLBootstrapType     MessageType = 14
	ACLTokenUpsertType   MessageType = 15
	ACLTokenDeleteType   MessageType = 16
	ACLPolicyUpsertType  MessageType = 17
	ACLPolicyDeleteType  MessageType = 18
	WorkloadKeyType      MessageType = 20 // a WorkloadKeyRequest (SPEC §15)
	NodeSecretResetType  MessageType = 21 // a NodeSecretResetRequest (SPEC §15)
	NodeDrainType        MessageType = 22 // a NodeDrainRequest (SPEC §20)
	GCType               MessageType = 23 // a GCRequest (SPEC §20)
	// ContainerUpdateBatchType is a ContainerUpdateBatchRequest: many
	// heartbeats' ContainerUpdateRequests in one entry (the leader's
	// heartbeat batcher).
	ContainerUpdateBatchType MessageType = 24
	// AppSubmitUnmanagedType is an AppSubmitUnmanagedRequest: the
	// unmanaged AM of an app spanning into this sub-cluster (SPEC §18).
	AppSubmitUnmanagedType MessageType = 25
	// AppCountersType is an AppCountersRequest: the counters an app's AM
	// reported (SPEC §19).
	AppCountersType MessageType = 26
	// AppBlacklistType is an AppBlacklistRequest: nodes an app's AM
	// blacklisted or took off its blacklist.
	AppBlacklistType MessageType = 27
)

// IgnoreUnknownTypeFlag marks a command that a server which does not know
// its type may skip, so that newer servers can add optional commands during
// a rolling upgrade.
const IgnoreUnknownTypeFlag MessageType = 0x80

// QueueConfigApplyRequest replaces the queue configuration atomically.
type QueueConfigApplyRequest struct {
	Config *scheduler.QueueConfig `codec:"config"`
	// Now is the leader's clock when it proposed the command, in Unix
	// nanoseconds; Apply uses it instead of reading a clock.
	Now int64 `codec:"now"`
}

// NodeRegisterRequest registers (or re-registers) an agent. The result is
// the node's new epoch (uint64). SecretHash is the SHA-256 of the node
// secret the agent presented: a node that has one is re-registered only
// with the same; one that has none takes this one. MintKey is the node's
// public minting key (empty: it has none).
type NodeRegisterRequest struct {
	ID         string              `codec:"id"`
	Address    string              `codec:"address"`
	Rack       string              `codec:"rack"`
	Capacity   scheduler.Resources `codec:"capacity"`
	Now        int64               `codec:"now"`
	SecretHash []byte              `codec:"secret_hash"`
	MintKey    []byte              `codec:"mint_key,omitempty"`
}

// NodeStatusRequest changes a node's status (for example to DOWN). It
// applies only if the node is still at Epoch, so a decision about an old
// registration never touches a new one.
type NodeStatusRequest struct {
	ID     string               `codec:"id"`
	Epoch  uint64               `codec:"epoch"`
	Status scheduler.NodeStatus `codec:"status"`
	Reason string               `codec:"reason"`
	Now    int64                `codec:"now"`
}

// AppSubmitRequest submits an app. The result is the new app's ID (string),
// derived from the Raft index so that it never repeats.
type AppSubmitRequest struct {
	Spec scheduler.AppSpec `codec:"spec"`
	Now  int64             `codec:"now"`
	// UIDs, when not empty, is the dynamic uid range the app's uid is
	// taken from (the leader's configuration, carried so that every
	// server picks the same).
	UIDs UIDRange `codec:"uids,omitempty"`
}

// UIDRange is an inclusive range of Unix uids, [First, Last]; the zero
// range is empty.
type UIDRange struct {
	First uint32 `codec:"first"`
	Last  uint32 `codec:"last"`
}

// Empty reports whether r holds no uid.
func (r UIDRange) Empty() bool { return r.First == 0 || r.Last < r.First }

// AppRegisterRequest records that an AM attempt registered: the app runs.
type AppRegisterRequest struct {
	AppID   string `codec:"app_id"`
	Attempt int    `codec:"attempt"`
	Now     int64  `codec:"now"`
}

// AppFinishRequest ends an app: FINISHED or FAILED from its AM (Attempt set),
// or KILLED by a user or the leader (Attempt 0). An unmanaged AM (Attempt
// set) may end its app KILLED too: its home app was killed. Live
// containers are stopped.
type AppFinishRequest struct {
	AppID       string             `codec:"app_id"`
	Attempt     int                `codec:"attempt"`
	State       scheduler.AppState `codec:"state"`
	Diagnostics string             `codec:"diagnostics"`
	Now         int64              `codec:"now"`
	// Counters, from the app's AM (Attempt set), replace the app's with
	// its final figures as it ends; nil leaves them as they are. An end
	// that is not the AM's carries none.
	Counters scheduler.Counters `codec:"counters,omitempty"`
}

// AskUpdateRequest sets an attempt's outstanding guaranteed asks. Each ask's
// Count is what the AM still wants as of SeenIndex, the newest state it has
// seen: containers placed for that ask after SeenIndex are subtracted, so an
// AM that has not yet heard of a placement never gets it twice.
type AskUpdateRequest struct {
	AppID     string          `codec:"app_id"`
	Attempt   int             `codec:"attempt"`
	Asks      []scheduler.Ask `codec:"asks"`
	SeenIndex uint64          `codec:"seen_index"`
}

// PlanApplyRequest commits the leader's placements. Each is re-checked
// against its node's free guaranteed capacity, the app's state and its
// outstanding asks; the result is a *PlanResult.
type PlanApplyRequest struct {
	Placements []scheduler.Placement `codec:"placements"`
	Now        int64                 `codec:"now"`
}

// PlanResult says, per placement, the container ID it got or why it was
// refused (ID empty).
type PlanResult struct {
	IDs     []string `codec:"ids"`
	Refused []string `codec:"refused"`
}

// ContainerStatus is an agent's report of one container: its state since
// At, and when it started running (0 if it never did), which a container
// that ran between two reports would otherwise lose.
type ContainerStatus struct {
	ID          string                   `codec:"id"`
	State       scheduler.ContainerState `codec:"state"`
	ExitCode    *int                     `codec:"exit_code"`
	Reason      scheduler.ExitReason     `codec:"reason"`
	Diagnostics string                   `codec:"diagnostics"`
	At          int64                    `codec:"at"`
	StartedAt   int64                    `codec:"started_at"`
}

// ContainerRecord is an opportunistic container that an agent's AMRMProxy
// allocated, as the node it runs on first reports it.
type ContainerRecord struct {
	ID          string                   `codec:"id"`
	AppID       string                   `codec:"app_id"`
	Attempt     int                      `codec:"attempt"`
	AskID       uint64                   `codec:"ask_id"`
	Resources   scheduler.Resources      `codec:"resources"`
	State       scheduler.ContainerState `codec:"state"`
	ExitCode    *int                     `codec:"exit_code"`
	Reason      scheduler.ExitReason     `codec:"reason"`
	Diagnostics string                   `codec:"diagnostics"`
	AllocatedAt int64                    `codec:"allocated_at"`
	StartedAt   int64                    `codec:"started_at"`
	FinishedAt  int64                    `codec:"finished_at"`
}

// ContainerUpdateRequest records what one heartbeat of a node's agent
// changed: opportunistic containers its node runs that the servers do not
// know yet (Records), then state changes of known ones (Updates). Reports
// for containers not on that node, or older than what is recorded, are
// ignored; so are records that are malformed or of unknown apps.
type ContainerUpdateRequest struct {
	NodeID  string            `codec:"node_id"`
	Records []ContainerRecord `codec:"records"`
	Updates []ContainerStatus `codec:"updates"`
}

// ContainerUpdateBatchRequest carries the ContainerUpdateRequests of many
// heartbeats, applied in order as if each were its own entry: one that is
// rejected changes nothing and does not stop the others. The result is a
// *ContainerUpdateBatchResult.
type ContainerUpdateBatchRequest struct {
	Updates []ContainerUpdateRequest `codec:"updates"`
}

// ContainerUpdateBatchResult holds, per update of a
// ContainerUpdateBatchRequest, nil or the error that rejected it.
type ContainerUpdateBatchResult struct {
	Errors []error
}

// ContainerStopRequest stops containers: released by their AM, killed by a
// user, expired or lost. Containers that never started complete at once;
// started ones are marked for their agent to kill.
type ContainerStopRequest struct {
	AppID  string               `codec:"app_id"` // if set, every ID must belong to it
	IDs    []string             `codec:"ids"`
	Reason scheduler.ExitReason `codec:"reason"`
	Now    int64                `codec:"now"`
}

// PromoteRequest promotes running opportunistic containers of an app's
// current attempt to guaranteed. Each is re-checked against its node's free
// guaranteed capacity; the result is a *PromoteResult.
type PromoteRequest struct {
	AppID   string   `codec:"app_id"`
	Attempt int      `codec:"attempt"`
	IDs     []string `codec:"ids"`
	Now     int64    `codec:"now"`
}

// PromoteResult says, per ID of a PromoteRequest, "" when it was promoted
// or why it was not.
type PromoteResult struct {
	Refused []string `codec:"refused"`
}

// PreemptMark marks one container for preemption.
type PreemptMark struct {
	ContainerID string `codec:"container_id"`
	ForApp      string `codec:"for_app"`
	Reason      string `codec:"reason"`
}

// PreemptMarkRequest warns the victims' AMs: each live, unmarked
// guaranteed container is marked to be killed at KillAt, and the
// preemption is recorded on its app.
type PreemptMarkRequest struct {
	Marks  []PreemptMark `codec:"marks"`
	KillAt int64         `codec:"kill_at"`
	Now    int64         `codec:"now"`
}

// msgpackHandle is the codec for commands and snapshot records.
var msgpackHandle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.RawToString = true
	h.WriteExt = true
	return h
}()

// Encode builds a Raft command: the type byte, then body as msgpack.
func Encode(t MessageType, body any) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte(byte(t))
	if err := codec.NewEncoder(&buf, msgpackHandle).Encode(body); err != nil {
		return nil, fmt.Errorf("encode command %d: %w", t, err)
	}
	return buf.Bytes(), nil
}

func decode(buf []byte, out any) error {
	return codec.NewDecoderBytes(buf, msgpackHandle).Decode(out)
}
