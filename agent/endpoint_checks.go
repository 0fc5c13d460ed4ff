package agent

import (
	"fmt"

	wrpc "github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// checkID answers an ID that may not become a path element (see
// scheduler.ValidateID) with a bad-request error naming field. Every
// container method checks its IDs with it before anything else.
func checkID(field, id string) error {
	if err := scheduler.ValidateID(field, id); err != nil {
		return wrpc.Errorf(wrpc.CodeBadRequest, "%v", err)
	}
	return nil
}

// checkContainerIDs checks the IDs of a container to start: its own, its
// app's and its node's, and its attempt.
func checkContainerIDs(c *wrpc.ContainerInfo) error {
	for _, f := range []struct{ field, id string }{
		{"container.id", c.ID}, {"container.app_id", c.AppID}, {"container.node_id", c.NodeID},
	} {
		if err := checkID(f.field, f.id); err != nil {
			return err
		}
	}
	if c.Attempt < 0 {
		return wrpc.Errorf(wrpc.CodeBadRequest, "container.attempt must not be negative, not %d", c.Attempt)
	}
	return nil
}

// checkLogsRequest checks a Container.Logs request: an exact container
// ID, a known stream, an offset in the file.
func checkLogsRequest(args *wrpc.ContainerLogsRequest) error {
	if err := checkID("id", args.ID); err != nil {
		return err
	}
	switch {
	case args.Stream != "" && args.Stream != wrpc.StreamStdout && args.Stream != wrpc.StreamStderr:
		return wrpc.Errorf(wrpc.CodeBadRequest, "stream must be %s or %s, not %.32q", wrpc.StreamStdout, wrpc.StreamStderr, args.Stream)
	case args.Offset < 0:
		return wrpc.Errorf(wrpc.CodeBadRequest, "offset must not be negative, not %d", args.Offset)
	}
	return nil
}

// checkIDs checks a list of container IDs, naming the bad one by index.
func checkIDs(field string, ids []string) error {
	for i, id := range ids {
		if err := checkID(fmt.Sprintf("%s[%d]", field, i), id); err != nil {
			return err
		}
	}
	return nil
}
