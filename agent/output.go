package agent

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// Container output (SPEC §19): a reduce task fetches its partitions of a
// map's output from the map container's node. The agent serves files a
// completed container left in its work directory, and nothing outside it:
// the work directory belongs to the container's account, which may have
// left links, FIFOs or devices there for an agent running as root to
// trip on.

// output reads up to req.Limit bytes (rpc.MaxLogChunk at most, and when
// Limit is not positive) from req.Offset of the file req.Path in the work
// directory of a completed container of app. A container still queued or
// running is rpc.ErrConflict: its files are not whole yet. One the agent
// has forgotten is looked for under app's directory. The caller checked
// req (checkOutputRequest) and the token.
func (m *manager) output(req *rpc.ContainerOutputRequest, app string) (*rpc.ContainerOutputResponse, error) {
	limit := req.Limit
	if limit <= 0 || limit > rpc.MaxLogChunk {
		limit = rpc.MaxLogChunk
	}
	m.mu.Lock()
	c, known := m.byID[req.ID]
	var state scheduler.ContainerState
	dir := ""
	if known {
		state, dir = c.state, c.dir
	}
	m.mu.Unlock()
	if known && state != scheduler.ContainerCompleted {
		return nil, rpc.Errorf(rpc.CodeConflict, "container %s is still %s on node %s; its output is read once it completed",
			req.ID, state, m.nodeID)
	}
	if !known {
		var err error
		if dir, err = m.storedDir(app, req.ID); err != nil {
			return nil, err
		}
	}
	return readOutput(filepath.Join(dir, workDir), req.Path, req.Offset, limit, req.ID, m.nodeID)
}

// readOutput reads up to limit bytes from offset of the regular file path
// inside the directory work, through an os.Root: no link leads out of
// work, whatever its owner put there. It opens without blocking (a FIFO
// with no writer would hold the call forever) and refuses what is not a
// regular file of work's owner: a hard link to another account's file is
// not the container's output, even to an agent that may read it as root.
// id and node name the container in errors.
func readOutput(work, path string, offset int64, limit int, id, node string) (*rpc.ContainerOutputResponse, error) {
	// work's parent is the agent's and not writable by the container, so
	// work itself cannot be swapped for a link.
	wfi, err := os.Lstat(work)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("container %s left no work directory on node %s (it never started): %w", id, node, rpc.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	if !wfi.IsDir() {
		return nil, fmt.Errorf("container %s: %s is not a directory", id, work)
	}
	root, err := os.OpenRoot(work)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	// Stat first, so that a device is not even opened (opening one can
	// act); the opened file is checked again, as it may have been swapped.
	if fi, err := root.Stat(path); err != nil {
		return nil, outputOpenError(path, id, node, err)
	} else if err := checkOutputFile(fi, wfi, path, id); err != nil {
		return nil, err
	}
	f, err := root.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, outputOpenError(path, id, node, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkOutputFile(fi, wfi, path, id); err != nil {
		return nil, err
	}
	// A shuffle reads many small partitions: no buffer past the end.
	buf := make([]byte, max(0, min(int64(limit), fi.Size()-offset)))
	n, err := f.ReadAt(buf, offset)
	if err != nil && err != io.EOF {
		return nil, err
	}
	return &rpc.ContainerOutputResponse{Data: buf[:n], NextOffset: offset + int64(n), Size: fi.Size()}, nil
}

// checkOutputFile admits a regular file owned by the owner of the work
// directory it was found in.
func checkOutputFile(fi, work fs.FileInfo, path, id string) error {
	if !fi.Mode().IsRegular() {
		return rpc.Errorf(rpc.CodeBadRequest, "path %q is not a regular file in the work directory of container %s (%s)", path, id, fi.Mode().Type())
	}
	st, ok1 := fi.Sys().(*syscall.Stat_t)
	wst, ok2 := work.Sys().(*syscall.Stat_t)
	if ok1 && ok2 && st.Uid != wst.Uid {
		return rpc.Errorf(rpc.CodeBadRequest, "path %q in the work directory of container %s belongs to uid %d, not to the container's uid %d",
			path, id, st.Uid, wst.Uid)
	}
	return nil
}

// outputOpenError names path in an error opening it: not found when it is
// not there, a bad request otherwise (a link out of the work directory, a
// file where a directory was named, a loop).
func outputOpenError(path, id, node string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("path %q %w in the work directory of container %s on node %s", path, rpc.ErrNotFound, id, node)
	}
	return rpc.Errorf(rpc.CodeBadRequest, "path %q cannot be read in the work directory of container %s: %v", path, id, unwrapPath(err))
}

// unwrapPath drops a PathError's operation and path, which the message
// names already.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
