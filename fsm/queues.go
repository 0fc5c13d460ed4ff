package fsm

import (
	"strings"
)

// invalidQueueConfig opens the message of every rejection of a queue
// configuration.
const invalidQueueConfig = "invalid queue configuration: "

func (t *txn) applyQueueConfig(index uint64, req *QueueConfigApplyRequest) error {
	if req.Config == nil {
		return reject(ErrInvalid, invalidQueueConfig+"no configuration given")
	}
	if errs := req.Config.Validate(); len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = e.Error()
		}
		return reject(ErrInvalid, "%s%s", invalidQueueConfig, strings.Join(msgs, "; "))
	}
	leaves := map[string]bool{}
	for _, q := range req.Config.Leaves() {
		leaves[q] = true
	}
	for _, a := range t.active() {
		if !leaves[a.Queue] {
			return reject(ErrConflict, "%squeue %s has active apps (e.g. %s); it must stay a leaf until they finish", invalidQueueConfig, a.Queue, a.ID)
		}
	}
	t.next.setQueues(req.Config)
	t.next.tableIndex[TableQueues] = index
	return nil
}
