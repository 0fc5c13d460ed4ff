package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weft-sched/weft/internal/testutil"
	"github.com/weft-sched/weft/rpc"
	"github.com/weft-sched/weft/scheduler"
)

// badOutputPaths are paths Container.Output refuses by their text alone.
var badOutputPaths = []string{
	"../stdout", "/etc/passwd", "", strings.Repeat("a", 300), "a\x00b", "a\nb", "a\x7fb",
	"..", ".", "./out", "out/", "out//part-0", "out/./part-0", "out/../stdout", "out/../../x",
}

// A path is admitted only when its text cannot leave the work directory,
// and refused with a bad request naming path otherwise.
func TestOutputPathsStayInTheWorkDirectory(t *testing.T) {
	for _, p := range []string{"part-0", "out/part-0", "a.b/c-d_e/f g", "..x/y..", strings.Repeat("a", rpc.MaxOutputPath)} {
		if err := checkOutputPath(p); err != nil {
			t.Errorf("path %q: %v; want it admitted", p, err)
		}
	}
	for _, p := range badOutputPaths {
		err := checkOutputPath(p)
		if !errors.Is(err, rpc.ErrBadRequest) || !strings.HasPrefix(err.Error(), "path ") {
			t.Errorf("path %q: %v; want a bad request naming path", p, err)
		}
	}
	for _, req := range []rpc.ContainerOutputRequest{
		{ID: "c-1-0", Path: "out", Offset: -1},
		{ID: "../c-1-0", Path: "out"},
	} {
		if err := checkOutputRequest(&req); !errors.Is(err, rpc.ErrBadRequest) {
			t.Errorf("request %+v: %v; want a bad request", req, err)
		}
	}
}

// readOutputOf reads path of container id of app-1 from m, failing the
// test if the read takes longer than a few seconds (a FIFO must not hold
// it).
func readOutputOf(t *testing.T, m *manager, id, app, path string, offset int64, limit int) (*rpc.ContainerOutputResponse, error) {
	t.Helper()
	type answer struct {
		resp *rpc.ContainerOutputResponse
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		resp, err := m.output(&rpc.ContainerOutputRequest{ID: id, Path: path, Offset: offset, Limit: limit}, app)
		done <- answer{resp, err}
	}()
	select {
	case a := <-done:
		return a.resp, a.err
	case <-time.After(10 * time.Second):
		t.Fatalf("reading %s of %s did not return", path, id)
		return nil, nil
	}
}

// The manager serves a completed container's regular files from its work
// directory, in full or in chunks, held in memory or forgotten; it refuses
// a container still running, links out of the work directory, FIFOs,
// directories and files of another account, and answers not found for a
// missing file or another app's container.
func TestOutputServesACompletedContainersRegularFiles(t *testing.T) {
	m := newTestManager(t, 1000, 10)
	m.start(info("r1", 100, scheduler.Guaranteed), sleepLong)
	waitState(t, m, "r1", scheduler.ContainerRunning)
	if _, err := readOutputOf(t, m, "r1", "app-1", "anything", 0, 0); !errors.Is(err, rpc.ErrConflict) || !strings.Contains(err.Error(), "still RUNNING") {
		t.Fatalf("output of a running container: %v; want a conflict", err)
	}

	script := "mkdir -p out d && printf abcdefgh > out/part-0 && ln -s out/part-0 inside && ln -s /etc/passwd passwd && " +
		"ln -s ../stdout up && ln -s ../../../.. top && mkfifo fifo && echo done"
	m.start(info("c1", 100, scheduler.Guaranteed), rpc.LaunchSpec{Command: []string{"sh", "-c", script}})
	if r := waitState(t, m, "c1", scheduler.ContainerCompleted); r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("the writing container ended %+v", r)
	}
	work := filepath.Join(m.dir, "app-1", "c1", workDir)
	foreign := os.Geteuid() == 0
	if foreign { // another account's file in the work directory, as a hard link would put there
		if err := os.WriteFile(filepath.Join(work, "foreign"), []byte("not yours"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(filepath.Join(work, "foreign"), 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}

	for _, forgotten := range []bool{false, true} {
		if forgotten {
			m.ack([]string{"c1"})
			if m.report("c1").ID != "" {
				t.Fatal("the container was not forgotten")
			}
		}
		for _, tc := range []struct {
			path   string
			offset int64
			limit  int
			want   string
			next   int64
		}{
			{"out/part-0", 0, 0, "abcdefgh", 8},
			{"out/part-0", 0, 3, "abc", 3},
			{"out/part-0", 6, 100, "gh", 8},
			{"out/part-0", 20, 0, "", 20},
			{"inside", 2, 2, "cd", 4}, // a link that stays inside
		} {
			resp, err := readOutputOf(t, m, "c1", "app-1", tc.path, tc.offset, tc.limit)
			if err != nil || string(resp.Data) != tc.want || resp.NextOffset != tc.next || resp.Size != 8 {
				t.Fatalf("forgotten %v: %s from %d, limit %d: %+v, %v; want %q, next %d, size 8",
					forgotten, tc.path, tc.offset, tc.limit, resp, err, tc.want, tc.next)
			}
		}
		// Chunk by chunk to the end.
		var got []byte
		for off, calls := int64(0), 0; ; calls++ {
			resp, err := readOutputOf(t, m, "c1", "app-1", "out/part-0", off, 3)
			if err != nil || len(resp.Data) > 3 || calls > 3 {
				t.Fatalf("chunk from %d: %+v, %v", off, resp, err)
			}
			got, off = append(got, resp.Data...), resp.NextOffset
			if off >= resp.Size {
				break
			}
		}
		if string(got) != "abcdefgh" {
			t.Fatalf("chunks made %q", got)
		}

		refused := []string{"passwd", "up", "top", "fifo", "d", "out"}
		if foreign {
			refused = append(refused, "foreign")
		}
		for _, p := range refused {
			resp, err := readOutputOf(t, m, "c1", "app-1", p, 0, 0)
			if !errors.Is(err, rpc.ErrBadRequest) || !strings.HasPrefix(err.Error(), "path ") || resp != nil {
				t.Errorf("forgotten %v: %s: read %v (%v); want a bad request naming path", forgotten, p, resp != nil, err)
			}
		}
		if _, err := readOutputOf(t, m, "c1", "app-1", "out/part-1", 0, 0); !rpc.IsNotFound(err) || !strings.Contains(err.Error(), `"out/part-1"`) {
			t.Errorf("forgotten %v: a missing file: %v; want not found naming it", forgotten, err)
		}
	}
	if _, err := readOutputOf(t, m, "c1", "app-2", "out/part-0", 0, 0); !rpc.IsNotFound(err) {
		t.Errorf("c1 looked for under another app: %v; want not found", err)
	}
	if _, err := readOutputOf(t, m, "nope", "app-1", "out/part-0", 0, 0); !rpc.IsNotFound(err) {
		t.Errorf("a container that never was: %v; want not found", err)
	}
}

// Container.Output serves a completed container's files to its app's AM
// only: a container token, another app's AM token and no token are
// refused, a running container is a conflict, and a bad path is refused
// before anything is read.
func TestContainerOutputIsForTheAppsAM(t *testing.T) {
	w := startAMWorld(t, 1, nil)
	node := w.agents[0]
	mapper := w.guaranteedContainer()
	launch := rpc.LaunchSpec{Command: []string{"sh", "-c", "mkdir -p out && printf abc > out/part-0 && ln -s /etc/passwd passwd && mkfifo fifo"}}
	if r, err := w.am.StartContainer(context.Background(), mapper, launch); err != nil || r.State != "RUNNING" {
		t.Fatalf("start the mapper: %+v, %v", r, err)
	}
	testutil.WaitFor(t, 15*time.Second, func() bool {
		c, ok := w.container(mapper.ID)
		return ok && c.State == "COMPLETED" && node.mgr.report(mapper.ID).ID == "" // ended, recorded and forgotten
	})
	if c, _ := w.container(mapper.ID); c.ExitCode == nil || *c.ExitCode != 0 {
		t.Fatalf("the mapper ended %+v", c)
	}
	running := w.guaranteedContainer()
	if running.ID == mapper.ID {
		t.Fatalf("the second allocation is the first container again")
	}
	if r := w.start(running); r.State != "RUNNING" {
		t.Fatalf("start: %+v", r)
	}
	_, _, _, amB := w.submitStandIn()

	ctx := context.Background()
	resp, err := w.am.ContainerOutput(ctx, mapper, rpc.ContainerOutputRequest{Path: "out/part-0"})
	if err != nil || string(resp.Data) != "abc" || resp.NextOffset != 3 || resp.Size != 3 {
		t.Fatalf("the whole partition: %+v, %v", resp, err)
	}
	resp, err = w.am.ContainerOutput(ctx, mapper, rpc.ContainerOutputRequest{Path: "out/part-0", Limit: 2})
	if err != nil || string(resp.Data) != "ab" || resp.NextOffset != 2 || resp.Size != 3 {
		t.Fatalf("the first two bytes: %+v, %v", resp, err)
	}
	resp, err = w.am.ContainerOutput(ctx, mapper, rpc.ContainerOutputRequest{Path: "out/part-0", Offset: 2, Limit: 2})
	if err != nil || string(resp.Data) != "c" || resp.NextOffset != 3 || resp.Size != 3 {
		t.Fatalf("the rest: %+v, %v", resp, err)
	}
	if _, err := w.am.ContainerOutput(ctx, running, rpc.ContainerOutputRequest{Path: "out/part-0"}); !errors.Is(err, rpc.ErrConflict) || !strings.Contains(err.Error(), "still RUNNING") {
		t.Fatalf("output of a running container: %v; want a conflict", err)
	}
	for _, p := range []string{"passwd", "fifo"} {
		if resp, err := w.am.ContainerOutput(ctx, mapper, rpc.ContainerOutputRequest{Path: p}); !errors.Is(err, rpc.ErrBadRequest) || len(resp.Data) > 0 {
			t.Errorf("%s: %q, %v; want a bad request", p, resp.Data, err)
		}
	}
	if _, err := w.am.ContainerOutput(ctx, mapper, rpc.ContainerOutputRequest{Path: "out/part-9"}); !rpc.IsNotFound(err) || !strings.Contains(err.Error(), "out/part-9") {
		t.Errorf("a missing file: %v; want not found naming it", err)
	}

	pool := rpc.NewPool(nil)
	defer pool.Shutdown()
	read := func(ci rpc.ContainerInfo, path, token string) (*rpc.ContainerOutputResponse, error) {
		var resp rpc.ContainerOutputResponse
		err := pool.Call(ctx, ci.NodeAddress, "Container.Output", &rpc.ContainerOutputRequest{ID: ci.ID, Path: path, Token: token}, &resp)
		return &resp, err
	}
	for _, tc := range []struct {
		name  string
		ci    rpc.ContainerInfo
		token string
		want  error
	}{
		{"the mapper's container token", mapper, mapper.Token, rpc.ErrPermissionDenied},
		{"a running container's own token", running, running.Token, rpc.ErrPermissionDenied},
		{"another app's AM token, container held", running, amB.Token, rpc.ErrPermissionDenied},
		// A forgotten container is looked for under the token's app only.
		{"another app's AM token, container forgotten", mapper, amB.Token, rpc.ErrNotFound},
		{"no token", mapper, "", rpc.ErrPermissionDenied},
		{"no token, container held", running, "", rpc.ErrPermissionDenied},
	} {
		resp, err := read(tc.ci, "out/part-0", tc.token)
		if !errors.Is(err, tc.want) || len(resp.Data) > 0 {
			t.Errorf("%s: %q, %v; want %v", tc.name, resp.Data, err, tc.want)
		}
	}
	for _, p := range badOutputPaths {
		resp, err := read(mapper, p, w.am.Token)
		if !errors.Is(err, rpc.ErrBadRequest) || !strings.HasPrefix(err.Error(), "path ") || len(resp.Data) > 0 {
			t.Errorf("path %q: %q, %v; want a bad request naming path", p, resp.Data, err)
		}
	}
	// The running container was left as it was.
	if r := node.mgr.report(running.ID); r.State != scheduler.ContainerRunning {
		t.Fatalf("the running container after the reads: %+v", r)
	}
}
