package agent

import (
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// logRetention removes completed containers' directories, their logs
// included, once log_retention has passed since each completed (SPEC §20),
// so that an agent's disk does not fill with the logs of apps long gone.
// It holds only directories: when a container completed is recorded by the
// manager on the agent's clock, and sweep is driven by that clock, so a
// test moves a fake clock instead of waiting.
type logRetention struct {
	logger hclog.Logger
	after  time.Duration
	root   string // <data-dir>/containers: nothing outside it is removed

	mu  sync.Mutex
	due map[string]int64 // container directory → Unix ns it may be removed at
}

func newLogRetention(logger hclog.Logger, root string, after time.Duration) *logRetention {
	return &logRetention{logger: logger.Named("log_retention"), after: after, root: root, due: map[string]int64{}}
}

// completed records that the container in dir completed at (Unix ns).
func (r *logRetention) completed(dir string, at int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.due[dir] = at + int64(r.after)
}

// adoptLeftovers takes in the container directories a previous run of the
// agent left (their containers are stopped by then): when they completed
// is unknown, so each is kept a full retention from now.
func (r *logRetention) adoptLeftovers(now time.Time) int {
	dirs, _ := filepath.Glob(filepath.Join(r.root, "*", "*"))
	n := 0
	for _, d := range dirs {
		if fi, err := os.Lstat(d); err == nil && fi.IsDir() {
			r.completed(d, now.UnixNano())
			n++
		}
	}
	return n
}

// sweep removes the directories due at or before now, and their app's
// directory once it is empty; it returns how many it removed.
func (r *logRetention) sweep(now time.Time) int {
	r.mu.Lock()
	var expired []string
	for dir, at := range r.due {
		if at <= now.UnixNano() {
			expired = append(expired, dir)
			delete(r.due, dir)
		}
	}
	r.mu.Unlock()
	sort.Strings(expired)
	removed := 0
	for _, dir := range expired {
		if rel, err := filepath.Rel(r.root, dir); err != nil || !filepath.IsLocal(rel) {
			continue // never outside the containers directory
		}
		if err := os.RemoveAll(dir); err != nil {
			r.logger.Warn("cannot remove a completed container's directory", "dir", dir, "error", err)
			continue
		}
		os.Remove(filepath.Dir(dir)) // the app's directory, if that was its last container
		removed++
	}
	if removed > 0 {
		r.logger.Debug("removed completed containers' directories", "count", removed, "log_retention", r.after)
	}
	return removed
}

// sweepInterval is how often the agent sweeps: a tenth of the retention,
// between a second and a minute.
func (r *logRetention) sweepInterval() time.Duration {
	return min(max(r.after/10, time.Second), time.Minute)
}

// retentionLoop sweeps on the agent's clock until the agent shuts down.
func (a *Agent) retentionLoop() {
	tick := a.clock.NewTicker(a.retention.sweepInterval())
	defer tick.Stop()
	for {
		select {
		case <-tick.C():
			// The clock's time, not the tick's: a tick may wait in the
			// channel while later ones are dropped.
			a.retention.sweep(a.clock.Now())
		case <-a.ctx.Done():
			return
		}
	}
}
