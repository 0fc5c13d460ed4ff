package am

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	wrpc "github.com/weft-sched/weft/rpc"
)

// A map task partitions its command's output by key hash, each partition
// sorted by key with a key's values in the order the map wrote them, and
// writes the index last with every partition's size.
func TestMapTaskPartitionsAndSortsItsOutput(t *testing.T) {
	dir := t.TempDir()
	split := filepath.Join(dir, "split")
	os.WriteFile(split, []byte("b a c\na b\nnotab-line\n"), 0o644)
	var stderr bytes.Buffer
	task := MapTask{Split: split, Reducers: 3, Dir: filepath.Join(dir, "work"), Stderr: &stderr,
		Command: []string{"awk", `{ for (i = 1; i <= NF; i++) print $i "\t" NR }`}}
	os.Mkdir(task.Dir, 0o755)
	if err := task.Run(context.Background()); err != nil {
		t.Fatalf("map: %v (stderr %q)", err, stderr.String())
	}
	var idx mapIndex
	b, err := os.ReadFile(filepath.Join(task.Dir, mapIndexFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	if idx.Records != 6 || idx.InputBytes != 21 || len(idx.Partitions) != 3 {
		t.Fatalf("index %+v: want 6 records of 21 input bytes in 3 partitions", idx)
	}
	all := map[string][]string{}
	for r := range 3 {
		data, err := os.ReadFile(filepath.Join(task.Dir, mapPartitionPath(r)))
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(data)) != idx.Partitions[r] {
			t.Errorf("partition %d holds %d bytes; the index says %d", r, len(data), idx.Partitions[r])
		}
		var keys []string
		for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
			if line == "" {
				continue
			}
			key, value, _ := strings.Cut(line, "\t")
			if p := Partition([]byte(key), 3); p != r {
				t.Errorf("key %q is in partition %d; it hashes to %d", key, r, p)
			}
			keys = append(keys, key)
			all[key] = append(all[key], value)
		}
		if !slices.IsSorted(keys) {
			t.Errorf("partition %d is not sorted by key: %q", r, keys)
		}
	}
	want := map[string][]string{"a": {"1", "2"}, "b": {"1", "2"}, "c": {"1"}, "notab-line": {"3"}}
	if fmt.Sprint(all) != fmt.Sprint(want) {
		t.Errorf("map output %v, want %v (a key's values in the order written)", all, want)
	}
}

// A map whose command fails leaves no index: its output does not exist.
func TestAFailedMapLeavesNoIndex(t *testing.T) {
	dir := t.TempDir()
	split := filepath.Join(dir, "split")
	os.WriteFile(split, []byte("x\n"), 0o644)
	task := MapTask{Split: split, Reducers: 2, Dir: dir, Stderr: &bytes.Buffer{}, Command: []string{"sh", "-c", "cat; exit 3"}}
	if err := task.Run(context.Background()); err == nil {
		t.Fatal("a map command exiting 3 succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, mapIndexFile)); !os.IsNotExist(err) {
		t.Errorf("a failed map wrote its index (%v)", err)
	}
	missing := MapTask{Split: filepath.Join(dir, "nope"), Reducers: 2, Dir: dir, Stderr: &bytes.Buffer{}, Command: []string{"cat"}}
	if err := missing.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "split") {
		t.Errorf("a missing split: %v", err)
	}
}

// Merging keeps key order across runs and, for equal keys, the order of
// the runs; it works in passes when there are more runs than it opens at
// once.
func TestMergeRunsInPasses(t *testing.T) {
	dir := t.TempDir()
	var runs []string
	var want []string
	for i := range mergeFanIn*2 + 5 {
		path := filepath.Join(dir, fmt.Sprintf("run-%d", i))
		lines := []string{fmt.Sprintf("k%03d\t%d", i%7, i), fmt.Sprintf("z\t%d", i)}
		os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
		runs = append(runs, path)
		want = append(want, lines...)
	}
	slices.SortStableFunc(want, func(a, b string) int {
		return strings.Compare(string(splitKey([]byte(a))), string(splitKey([]byte(b))))
	})
	var out bytes.Buffer
	if err := mergeRuns(runs, dir, &out); err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if !slices.Equal(got, want) {
		t.Fatalf("merged %d lines; first difference from the stable sort:\n%s", len(got), firstDiff(got, want))
	}
}

func firstDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("line %d: %q, want %q", i, a[i], b[i])
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(a), len(b))
}

// fakeNodes serves map outputs from directories, as agents' Container.Output
// would, in chunks of chunk bytes; down containers answer unavailable,
// gone ones not_found.
type fakeNodes struct {
	dirs  map[string]string // container ID → work directory
	down  map[string]bool
	chunk int
	calls int
}

func (f *fakeNodes) ContainerOutput(ctx context.Context, ci wrpc.ContainerInfo, req wrpc.ContainerOutputRequest) (*wrpc.ContainerOutputResponse, error) {
	f.calls++
	if f.down[ci.ID] {
		return nil, wrpc.Errorf(wrpc.CodeUnavailable, "node of %s is down", ci.ID)
	}
	dir, ok := f.dirs[ci.ID]
	if !ok {
		return nil, wrpc.Errorf(wrpc.CodeNotFound, "container %s: %w", ci.ID, wrpc.ErrNotFound)
	}
	b, err := os.ReadFile(filepath.Join(dir, req.Path))
	if err != nil {
		return nil, wrpc.Errorf(wrpc.CodeNotFound, "%s: %w", req.Path, wrpc.ErrNotFound)
	}
	end := min(int64(len(b)), req.Offset+int64(f.chunk))
	return &wrpc.ContainerOutputResponse{Data: b[req.Offset:end], NextOffset: end, Size: int64(len(b))}, nil
}

// A reduce fetches its partition of each map's output, merges it and runs
// the reduce command into its output file; the shuffle report says what it
// read from each map.
func TestReduceTaskFetchesMergesAndReduces(t *testing.T) {
	root := t.TempDir()
	nodes := &fakeNodes{dirs: map[string]string{}, down: map[string]bool{}, chunk: 7}
	var feeds []Feed
	total := map[string]int{}
	for m := range 3 {
		work := filepath.Join(root, fmt.Sprintf("map-%d", m))
		os.Mkdir(work, 0o755)
		split := filepath.Join(root, fmt.Sprintf("split-%d", m))
		text := strings.Repeat(fmt.Sprintf("w%d shared ", m), m+1) + "\n"
		for _, w := range strings.Fields(text) {
			total[w]++
		}
		os.WriteFile(split, []byte(text), 0o644)
		task := MapTask{Split: split, Reducers: 1, Dir: work, Stderr: &bytes.Buffer{},
			Command: []string{"awk", `{ for (i = 1; i <= NF; i++) print $i "\t1" }`}}
		if err := task.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("c-1-%d", m)
		nodes.dirs[id] = work
		feeds = append(feeds, Feed{Map: m, ContainerID: id, NodeAddress: "n"})
	}
	out, work := filepath.Join(root, "out"), filepath.Join(root, "reduce")
	os.Mkdir(out, 0o755)
	os.Mkdir(work, 0o755)
	var stderr bytes.Buffer
	reduce := ReduceTask{Partition: 0, Feeds: feeds, Output: out, Dir: work, Fetch: nodes, Stderr: &stderr,
		Command: []string{"awk", "-F", "\t", `$1 != w { if (NR > 1) print w "\t" n; w = $1; n = 0 } { n += $2 } END { if (NR > 0) print w "\t" n }`}}
	if err := reduce.Run(context.Background()); err != nil {
		t.Fatalf("reduce: %v (stderr %q)", err, stderr.String())
	}
	got, err := os.ReadFile(filepath.Join(out, "part-r-00000"))
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("shared\t%d\nw0\t%d\nw1\t%d\nw2\t%d\n", total["shared"], total["w0"], total["w1"], total["w2"])
	if string(got) != want {
		t.Errorf("output %q, want %q", got, want)
	}
	var rep shuffleReport
	b, _ := os.ReadFile(filepath.Join(work, shuffleFile))
	json.Unmarshal(b, &rep)
	for m, n := range rep.Bytes {
		fi, _ := os.Stat(filepath.Join(nodes.dirs[feeds[m].ContainerID], mapPartitionPath(0)))
		if fi == nil || n != fi.Size() {
			t.Errorf("shuffle report: %d bytes from map %d; its partition holds %v", n, m, fi)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(out, ".part-r-*")); len(left) > 0 {
		t.Errorf("temporary output left behind: %v", left)
	}
}

// A reduce that cannot fetch a map's output names the map and fails with
// ErrFetchFailed, writing no output; an unreachable node is tried
// FetchAttempts times, a node without the output once.
func TestReduceTaskNamesTheMapsItCouldNotFetch(t *testing.T) {
	root := t.TempDir()
	work := filepath.Join(root, "map-0")
	os.MkdirAll(filepath.Join(work, mapOutDir), 0o755)
	os.WriteFile(filepath.Join(work, mapPartitionPath(0)), []byte("k\t1\n"), 0o644)
	nodes := &fakeNodes{dirs: map[string]string{"c-1-0": work}, down: map[string]bool{"c-1-2": true}, chunk: 1 << 20}
	out, dir := filepath.Join(root, "out"), filepath.Join(root, "reduce")
	os.Mkdir(out, 0o755)
	os.Mkdir(dir, 0o755)
	reduce := ReduceTask{Partition: 0, Output: out, Dir: dir, Fetch: nodes, Stderr: &bytes.Buffer{}, Command: []string{"cat"},
		FetchAttempts: 3, FetchBackoff: 1,
		Feeds: []Feed{{Map: 0, ContainerID: "c-1-0", NodeAddress: "a"}, {Map: 1, ContainerID: "c-1-1", NodeAddress: "b"}, {Map: 2, ContainerID: "c-1-2", NodeAddress: "c"}}}
	err := reduce.Run(context.Background())
	if !errors.Is(err, ErrFetchFailed) {
		t.Fatalf("reduce with two maps' output gone: %v", err)
	}
	var lost []int
	b, _ := os.ReadFile(filepath.Join(dir, fetchFailuresFile))
	if err := json.Unmarshal(b, &lost); err != nil || !slices.Equal(lost, []int{1, 2}) {
		t.Errorf("fetch failures %v (%v), want maps [1 2]", lost, err)
	}
	if nodes.calls != 1+1+3 {
		t.Errorf("%d fetch calls; want 1 (map 0), 1 (map 1: not found) and 3 (map 2: down)", nodes.calls)
	}
	if parts, _ := filepath.Glob(filepath.Join(out, "*")); len(parts) > 0 {
		t.Errorf("a reduce that fetched nothing whole wrote %v", parts)
	}
}

func TestFeedArguments(t *testing.T) {
	f := Feed{Map: 12, ContainerID: "sc2.c-4-1", NodeAddress: "10.0.0.4:8049"}
	got, err := ParseFeed(f.String())
	if err != nil || got != f {
		t.Fatalf("ParseFeed(%q) = %+v, %v", f.String(), got, err)
	}
	for _, bad := range []string{"", "1,c", "x,c-1,a:1", "-1,c-1,a:1", "1,,a:1"} {
		if _, err := ParseFeed(bad); err == nil {
			t.Errorf("ParseFeed(%q) took it", bad)
		}
	}
}
