package agent

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// containerDir is the one place a container's directory is named:
// <data-dir>/containers/<app ID>/<container ID>. It refuses IDs that are
// not scheduler.ValidateID's, so no caller text can lead outside the
// containers directory, whatever the RPC layer checked before.
func (m *manager) containerDir(appID, id string) (string, error) {
	if err := scheduler.ValidateID("container.app_id", appID); err != nil {
		return "", err
	}
	if err := scheduler.ValidateID("container.id", id); err != nil {
		return "", err
	}
	return filepath.Join(m.dir, appID, id), nil
}

// storedDir is the directory of a container the agent no longer holds in
// memory (a completed one whose end the leader recorded, or one from a
// previous run): under app's directory when the caller's token names the
// app, else wherever findDir finds it. A container that is not there is
// rpc.ErrNotFound.
func (m *manager) storedDir(app, id string) (string, error) {
	if app == "" {
		return m.findDir(id)
	}
	dir, err := m.containerDir(app, id)
	if err != nil {
		return "", err
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("container %s of app %s %w on node %s", id, app, rpc.ErrNotFound, m.nodeID)
	}
	return dir, nil
}

// findDir finds the directory of a container the agent no longer holds in
// memory (its logs stay on disk): the one app directory that holds exactly
// this container ID. Nothing in id is a pattern.
func (m *manager) findDir(id string) (string, error) {
	if err := scheduler.ValidateID("id", id); err != nil {
		return "", rpc.Errorf(rpc.CodeBadRequest, "%v", err)
	}
	apps, err := os.ReadDir(m.dir)
	if err != nil {
		return "", err
	}
	for _, app := range apps {
		if !app.IsDir() {
			continue
		}
		dir, err := m.containerDir(app.Name(), id)
		if err != nil {
			continue // not a directory the agent made
		}
		if fi, err := os.Lstat(dir); err == nil && fi.IsDir() {
			return dir, nil
		}
	}
	return "", fmt.Errorf("container %s %w on node %s", id, rpc.ErrNotFound, m.nodeID)
}
