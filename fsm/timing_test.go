package fsm

import (
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func TestEveryCommandTypeHasAName(t *testing.T) {
	seen := map[string]MessageType{}
	for mt := range commandBodies {
		name := CommandName(mt)
		if name == "unknown" {
			t.Errorf("command type %d has no name in commandNames", mt)
		}
		if other, dup := seen[name]; dup {
			t.Errorf("command types %d and %d are both named %q", other, mt, name)
		}
		seen[name] = mt
	}
	if got := CommandName(0x7f); got != "unknown" {
		t.Errorf("CommandName(0x7f) = %q, want unknown", got)
	}
}

func TestApplyTimerTimesEachAppliedCommandByItsType(t *testing.T) {
	var timed []string
	f := New(nil, WithApplyTimer(func(command string) func() {
		return func() { timed = append(timed, command) }
	}))
	body, err := Encode(QueueConfigApplyType, &QueueConfigApplyRequest{Config: testConfig(), Now: 1})
	if err != nil {
		t.Fatal(err)
	}
	// A client write: the envelope is timed as the command it carries.
	env := command(t, 2, RequestType, &RequestEnvelope{ID: "r1", Now: time.Unix(1, 0).UnixNano(), Type: QueueConfigApplyType, Body: body[1:]})
	f.ApplyBatch([]*raft.Log{
		command(t, 1, NodeStatusType, &NodeStatusRequest{ID: "missing"}), // rejected, but applied: timed
		env,
		command(t, 3, MessageType(0x33), struct{}{}), // cannot be applied: halts, not timed
	})
	if want := []string{"node_status", "queue_config_apply"}; !reflect.DeepEqual(timed, want) {
		t.Fatalf("timed %v, want %v", timed, want)
	}
}
