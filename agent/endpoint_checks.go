package agent

import (
	"fmt"
	"path/filepath"
	"strings"
	"unicode"

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

// checkOutputRequest checks a Container.Output request: an exact
// container ID, a path that names a file inside the work directory, an
// offset in the file.
func checkOutputRequest(args *wrpc.ContainerOutputRequest) error {
	if err := checkID("id", args.ID); err != nil {
		return err
	}
	if err := checkOutputPath(args.Path); err != nil {
		return err
	}
	if args.Offset < 0 {
		return wrpc.Errorf(wrpc.CodeBadRequest, "offset must not be negative, not %d", args.Offset)
	}
	return nil
}

// checkOutputPath admits a path relative to a container's work directory
// that cannot leave it by its text: not empty, at most rpc.MaxOutputPath
// bytes, not absolute, no empty, "." or ".." element, no control
// character. Links are os.Root's to stop (readOutput).
func checkOutputPath(p string) error {
	switch {
	case p == "":
		return wrpc.Errorf(wrpc.CodeBadRequest, "path must name a file in the container's work directory, not be empty")
	case len(p) > wrpc.MaxOutputPath:
		return wrpc.Errorf(wrpc.CodeBadRequest, "path must be at most %d bytes, not %d", wrpc.MaxOutputPath, len(p))
	case strings.ContainsFunc(p, unicode.IsControl):
		return wrpc.Errorf(wrpc.CodeBadRequest, "path must not hold control characters: %q", p)
	case !filepath.IsLocal(p) || hasDotOrEmptyElement(p):
		return wrpc.Errorf(wrpc.CodeBadRequest, "path must be relative to the work directory, without empty, . or .. elements, not %q", p)
	}
	return nil
}

// hasDotOrEmptyElement reports whether a slash-separated path has an
// element that is empty, "." or "..".
func hasDotOrEmptyElement(p string) bool {
	for e := range strings.SplitSeq(p, "/") {
		if e == "" || e == "." || e == ".." {
			return true
		}
	}
	return false
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
