package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/weft-sched/weft/fsm"
)

func TestAHaltedServerExitsWithItsOwnCodeAndTheRecovery(t *testing.T) {
	halt := fmt.Errorf("%w; to recover, restart every server with -raft-skip-index 9",
		&fsm.HaltError{Index: 9, Type: 0x42, Reason: "unknown command type 66"})
	commands["halted-for-test"] = func([]string) error { return halt }
	commands["failed-for-test"] = func([]string) error { return fmt.Errorf("other") }
	var buf bytes.Buffer
	old := stderr
	stderr = &buf
	t.Cleanup(func() {
		delete(commands, "halted-for-test")
		delete(commands, "failed-for-test")
		stderr = old
	})
	if code := run([]string{"halted-for-test"}); code != exitHalted || exitHalted != 3 {
		t.Fatalf("exit code %d, want 3", code)
	}
	if out := buf.String(); !strings.Contains(out, "index 9") || !strings.Contains(out, "-raft-skip-index 9") {
		t.Fatalf("stderr %q does not name the entry and the recovery", out)
	}
	if code := run([]string{"failed-for-test"}); code != 1 {
		t.Fatalf("another error exits %d, want 1", code)
	}
}
