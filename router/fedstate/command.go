package fedstate

import (
	"bytes"
	"fmt"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/weft-sched/weft/scheduler"
	"github.com/weft-sched/weft/scheduler/federation"
)

// MessageType is the leading byte of every command in the routers' log.
// Values are part of the on-disk format: never reuse or renumber one.
type MessageType uint8

// Command types.
const (
	HeartbeatType     MessageType = 1  // a HeartbeatRequest
	MarkLostType      MessageType = 2  // a MarkLostRequest
	AdminType         MessageType = 3  // an AdminRequest
	HomePutType       MessageType = 4  // a HomePutRequest
	HomeAdvanceType   MessageType = 5  // a HomeAdvanceRequest
	HomeSettleType    MessageType = 6  // a HomeSettleRequest
	HomeGCType        MessageType = 7  // a HomeGCRequest
	PolicyApplyType   MessageType = 8  // a PolicyApplyRequest
	WeightsWriteType  MessageType = 9  // a WeightsWriteRequest
	SpanAddType       MessageType = 10 // a SpanAddRequest
	maxKnownType                  = SpanAddType
	ignoreUnknownFlag MessageType = 0x80
	typeMask          MessageType = 0x7f
)

// HeartbeatRequest is a sub-cluster leader's report (SPEC §18). The first
// heartbeat of an unknown ID adds the sub-cluster as NEW.
type HeartbeatRequest struct {
	ID          string                           `codec:"id"`
	Healthy     bool                             `codec:"healthy"`
	Reason      string                           `codec:"reason,omitempty"`
	Servers     []string                         `codec:"servers"`
	HTTPAddr    string                           `codec:"http_addr,omitempty"`
	Leader      string                           `codec:"leader"`
	Term        uint64                           `codec:"term"`
	Seq         uint64                           `codec:"seq"`
	Capacity    scheduler.Resources              `codec:"capacity"`
	Used        scheduler.Resources              `codec:"used"`
	Pending     scheduler.Resources              `codec:"pending"`
	NodesReady  int                              `codec:"nodes_ready"`
	NodesTotal  int                              `codec:"nodes_total"`
	AppsRunning int                              `codec:"apps_running"`
	Queues      map[string]*federation.QueueLoad `codec:"queues"`
	Racks       []string                         `codec:"racks"`
	// UnmanagedAMs counts the apps spanning into it from elsewhere.
	UnmanagedAMs int   `codec:"unmanaged_ams,omitempty"`
	Now          int64 `codec:"now"`
}

// MarkLostRequest marks a sub-cluster LOST if its last heartbeat is still
// the one the leader saw when it decided (a heartbeat that raced the
// decision wins).
type MarkLostRequest struct {
	ID            string `codec:"id"`
	LastHeartbeat int64  `codec:"last_heartbeat"`
	Now           int64  `codec:"now"`
}

// AdminAction is an operator's action on a sub-cluster.
type AdminAction string

// The operator's actions.
const (
	Decommission AdminAction = "decommission"
	Recommission AdminAction = "recommission"
	Forget       AdminAction = "forget" // only a DECOMMISSIONED one
)

// AdminRequest is an operator's action on a sub-cluster.
type AdminRequest struct {
	ID     string      `codec:"id"`
	Action AdminAction `codec:"action"`
	Now    int64       `codec:"now"`
}

// HomePutRequest records the home of a new app before it is submitted
// there. Apply ranks the candidates by the queue's policy and mints the
// app ID; the result is the *AppHome. A request ID seen before gets its
// mapping back unchanged (a retried submission, through any router).
type HomePutRequest struct {
	RequestID string              `codec:"request_id"`
	Queue     string              `codec:"queue"`
	User      string              `codec:"user"`
	Demand    scheduler.Resources `codec:"demand"`
	Preferred scheduler.Locality  `codec:"preferred"`
	// Seed is random per request (a hash of RequestID).
	Seed uint64 `codec:"seed"`
	Now  int64  `codec:"now"`
}

// HomeAdvanceRequest moves a submission refused by (or never sent to)
// From to the next RUNNING sub-cluster of its ranking, or to FAILED when
// none is left. It applies only while the home is still From, and to an
// IN_DOUBT submission only on a refusal.
type HomeAdvanceRequest struct {
	AppID string `codec:"app_id"`
	From  string `codec:"from"`
	// Outcome is OutcomeRefused (From answered that it will not take the
	// app), OutcomeUnreachable (no server of From took the connection:
	// nothing was sent) or OutcomeFenced (From, decommissioned, is given
	// up on for an IN_DOUBT submission).
	Outcome string `codec:"outcome"`
	Message string `codec:"message,omitempty"`
	Now     int64  `codec:"now"`
}

// The outcomes of a try. OutcomeFenced moves an IN_DOUBT submission off
// a home an operator decommissioned: the operator's word that the home
// will not come back with the app.
const (
	OutcomeRefused     = "refused"
	OutcomeUnreachable = "unreachable"
	OutcomeFenced      = "fenced"
)

// HomeSettleRequest records the outcome of a submission to Home.
type HomeSettleRequest struct {
	AppID string    `codec:"app_id"`
	Home  string    `codec:"home"`
	State HomeState `codec:"state"`
	// LocalID is the app's ID at Home (with SUBMITTED).
	LocalID string `codec:"local_id,omitempty"`
	Now     int64  `codec:"now"`
}

// SpanAddRequest records that a SUBMITTED app spans into Subcluster
// besides its home: an AMRMProxy asked for an unmanaged AM there. Adding
// a span the app has changes nothing.
type SpanAddRequest struct {
	AppID      string `codec:"app_id"`
	Subcluster string `codec:"subcluster"`
	Now        int64  `codec:"now"`
}

// HomeGCRequest drops SUBMITTED mappings created before Before and FAILED
// ones created before FailedBefore.
type HomeGCRequest struct {
	Before       int64 `codec:"before"`
	FailedBefore int64 `codec:"failed_before"`
}

// PolicyApplyRequest sets policies: replacing all of them, or only those
// of the queues it names.
type PolicyApplyRequest struct {
	Policies []federation.Policy `codec:"policies"`
	Replace  bool                `codec:"replace"`
}

// WeightsWriteRequest is the policy generator's output for some queues.
// Generation must be above the last one written, so a deposed leader's
// late write changes nothing.
type WeightsWriteRequest struct {
	Generation uint64                       `codec:"generation"`
	Weights    map[string]map[string]uint32 `codec:"weights"` // queue → sub-cluster → weight
}

var msgpackHandle = func() *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.RawToString = true
	// Maps are written in key order, so that one state always snapshots
	// to the same bytes (routers compare them in tests, and so can people).
	h.Canonical = true
	return h
}()

// Encode builds a command: the type byte, then body as msgpack.
func Encode(t MessageType, body any) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte(byte(t))
	if err := codec.NewEncoder(&buf, msgpackHandle).Encode(body); err != nil {
		return nil, fmt.Errorf("encode command %d: %w", t, err)
	}
	return buf.Bytes(), nil
}

func encodeBody(v any) ([]byte, error) {
	var out []byte
	err := codec.NewEncoderBytes(&out, msgpackHandle).Encode(v)
	return out, err
}

func decode(buf []byte, out any) error {
	return codec.NewDecoderBytes(buf, msgpackHandle).Decode(out)
}
