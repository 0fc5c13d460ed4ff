package fsm

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidQueueConfig wraps every rejection of a queue configuration.
var ErrInvalidQueueConfig = errors.New("invalid queue configuration")

func (t *txn) applyQueueConfig(index uint64, req *QueueConfigApplyRequest) error {
	if req.Config == nil {
		return fmt.Errorf("%w: no configuration given", ErrInvalidQueueConfig)
	}
	if errs := req.Config.Validate(); len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = e.Error()
		}
		return fmt.Errorf("%w: %s", ErrInvalidQueueConfig, strings.Join(msgs, "; "))
	}
	leaves := map[string]bool{}
	for _, q := range req.Config.Leaves() {
		leaves[q] = true
	}
	for _, a := range t.active() {
		if !leaves[a.Queue] {
			return fmt.Errorf("%w: queue %s has active apps (e.g. %s); it must stay a leaf until they finish", ErrInvalidQueueConfig, a.Queue, a.ID)
		}
	}
	t.next.setQueues(req.Config)
	t.next.tableIndex[TableQueues] = index
	return nil
}
