package am

import (
	"bufio"
	"bytes"
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	wrpc "github.com/weft-sched/weft/rpc"
)

// The files a MapReduce task leaves in its container's work directory, for
// the reduces and the AM to read with Container.Output (SPEC §19).
const (
	// mapOutDir holds a map's partitions, mapOutDir/part-NNNNN, each
	// sorted by key, and mapIndexFile, written last: a map's output exists
	// once its index does.
	mapOutDir    = "mapout"
	mapIndexFile = mapOutDir + "/index.json"
	// fetchFailuresFile names the maps a reduce could not fetch from; the
	// reduce then exits ExitFetchFailed.
	fetchFailuresFile = "fetch-failures.json"
	// shuffleFile is what a reduce fetched, map by map.
	shuffleFile = "shuffle.json"
)

// ExitFetchFailed is a reduce task's exit code when it could not fetch
// some map's output: the AM runs those maps again, then the reduce.
const ExitFetchFailed = 75 // EX_TEMPFAIL

// mapPartitionPath is the path, in a map's work directory, of its
// partition r.
func mapPartitionPath(r int) string { return fmt.Sprintf("%s/part-%05d", mapOutDir, r) }

// reduceOutputName is partition r's file in the job's output directory.
func reduceOutputName(r int) string { return fmt.Sprintf("part-r-%05d", r) }

// Partition is the reduce a key goes to among reducers: FNV-1a of the key,
// the same in every map task.
func Partition(key []byte, reducers int) int {
	h := fnv.New32a()
	h.Write(key)
	return int(h.Sum32() % uint32(reducers))
}

// splitKey is a map output line's key: what comes before its first TAB,
// or the whole line (as Hadoop streaming has it).
func splitKey(line []byte) []byte {
	if i := bytes.IndexByte(line, '\t'); i >= 0 {
		return line[:i]
	}
	return line
}

// mapIndex is a map's account of its output.
type mapIndex struct {
	// Partitions holds each partition's size in bytes.
	Partitions []int64 `json:"partitions"`
	Records    int64   `json:"records"`
	InputBytes int64   `json:"input_bytes"`
}

// MapTask is a map task: it runs Command with the split on stdin and
// partitions its `key<TAB>value` stdout among Reducers, each partition
// sorted by key, into Dir (the container's work directory).
type MapTask struct {
	Split    string
	Reducers int
	Command  []string
	Dir      string
	Stderr   io.Writer
}

// Run runs the map; the error says why it failed.
func (t *MapTask) Run(ctx context.Context) error {
	in, err := os.Open(t.Split)
	if err != nil {
		return fmt.Errorf("split: %w", err)
	}
	defer in.Close()
	cmd := exec.CommandContext(ctx, t.Command[0], t.Command[1:]...)
	cmd.Stdin, cmd.Stderr = in, t.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("map command: %w", err)
	}
	parts := make([][][]byte, t.Reducers)
	var idx mapIndex
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), maxRecord)
	for sc.Scan() {
		line := bytes.Clone(sc.Bytes())
		r := Partition(splitKey(line), t.Reducers)
		parts[r] = append(parts[r], line)
		idx.Records++
	}
	scanErr := sc.Err()
	if scanErr != nil {
		io.Copy(io.Discard, out) // let the command finish writing
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("map command: %w", err)
	}
	if scanErr != nil {
		return fmt.Errorf("map output: %w (a record may be at most %d bytes)", scanErr, maxRecord)
	}
	if fi, err := in.Stat(); err == nil {
		idx.InputBytes = fi.Size()
	}
	if err := os.MkdirAll(filepath.Join(t.Dir, mapOutDir), 0o755); err != nil {
		return err
	}
	idx.Partitions = make([]int64, t.Reducers)
	for r, lines := range parts {
		// Stable: a key's values keep the order the map wrote them in.
		slices.SortStableFunc(lines, func(a, b []byte) int { return bytes.Compare(splitKey(a), splitKey(b)) })
		n, err := writeLines(filepath.Join(t.Dir, mapPartitionPath(r)), lines)
		if err != nil {
			return err
		}
		idx.Partitions[r] = n
	}
	return writeJSONAtomically(filepath.Join(t.Dir, mapIndexFile), idx)
}

// maxRecord bounds one line of map output.
const maxRecord = 16 << 20

func writeLines(path string, lines [][]byte) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriterSize(f, 256<<10)
	var n int64
	for _, l := range lines {
		w.Write(l)
		w.WriteByte('\n')
		n += int64(len(l)) + 1
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return 0, err
	}
	return n, f.Close()
}

// writeJSONAtomically writes v to path whole or not at all.
func writeJSONAtomically(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Feed is one map's output a reduce fetches: the map's index in the job
// and its container.
type Feed struct {
	Map         int
	ContainerID string
	NodeAddress string
}

// String is the -feed argument of a reduce task: MAP,CONTAINER,ADDRESS.
func (f Feed) String() string { return fmt.Sprintf("%d,%s,%s", f.Map, f.ContainerID, f.NodeAddress) }

// ParseFeed reads a -feed argument.
func ParseFeed(s string) (Feed, error) {
	parts := strings.SplitN(s, ",", 3)
	if len(parts) != 3 || parts[1] == "" || parts[2] == "" {
		return Feed{}, fmt.Errorf("feed %.64q: want MAP,CONTAINER,ADDRESS", s)
	}
	m, err := strconv.Atoi(parts[0])
	if err != nil || m < 0 {
		return Feed{}, fmt.Errorf("feed %.64q: the map index must be a number", s)
	}
	return Feed{Map: m, ContainerID: parts[1], NodeAddress: parts[2]}, nil
}

// Fetcher reads a file from a completed container's work directory.
type Fetcher interface {
	ContainerOutput(ctx context.Context, ci wrpc.ContainerInfo, req wrpc.ContainerOutputRequest) (*wrpc.ContainerOutputResponse, error)
}

// shuffleReport is what a reduce fetched: bytes per feed, in the order of
// its -feed arguments.
type shuffleReport struct {
	Bytes []int64 `json:"bytes"`
}

// ReduceTask is a reduce task: it fetches its partition of every map's
// output, merges them by key and runs Command on the merged lines; the
// command's stdout becomes Output/part-r-NNNNN.
type ReduceTask struct {
	Partition int
	Feeds     []Feed
	Output    string
	Command   []string
	Dir       string
	Fetch     Fetcher
	Stderr    io.Writer
	// FetchAttempts is how often a fetch is tried before its map is
	// reported lost [3]; FetchBackoff the pause after a failed try [500ms].
	FetchAttempts int
	FetchBackoff  time.Duration
}

// ErrFetchFailed is returned by ReduceTask.Run when some maps' output
// could not be fetched; fetchFailuresFile names them.
var ErrFetchFailed = errors.New("could not fetch some maps' output")

// Run runs the reduce.
func (t *ReduceTask) Run(ctx context.Context) error {
	in := filepath.Join(t.Dir, "shuffle")
	if err := os.MkdirAll(in, 0o755); err != nil {
		return err
	}
	report := shuffleReport{Bytes: make([]int64, len(t.Feeds))}
	var runs []string
	var lost []int
	for i, f := range t.Feeds {
		path := filepath.Join(in, fmt.Sprintf("map-%05d", f.Map))
		n, err := t.fetch(ctx, f, path)
		if err != nil {
			fmt.Fprintf(t.Stderr, "weft reduce: map %d (container %s at %s): %v\n", f.Map, f.ContainerID, f.NodeAddress, err)
			lost = append(lost, f.Map)
			continue
		}
		report.Bytes[i] = n
		runs = append(runs, path)
	}
	if len(lost) > 0 {
		if err := writeJSONAtomically(filepath.Join(t.Dir, fetchFailuresFile), lost); err != nil {
			return err
		}
		return fmt.Errorf("%w: maps %v", ErrFetchFailed, lost)
	}
	if err := writeJSONAtomically(filepath.Join(t.Dir, shuffleFile), report); err != nil {
		return err
	}
	return t.reduce(ctx, runs)
}

// fetch copies feed f's partition into path, trying FetchAttempts times
// unless the node says the output is not there.
func (t *ReduceTask) fetch(ctx context.Context, f Feed, path string) (int64, error) {
	attempts, backoff := max(1, t.FetchAttempts), t.FetchBackoff
	if t.FetchAttempts == 0 {
		attempts = 3
	}
	if backoff == 0 {
		backoff = 500 * time.Millisecond
	}
	var err error
	for a := 0; a < attempts; a++ {
		var n int64
		if n, err = t.fetchOnce(ctx, f, path); err == nil {
			return n, nil
		}
		if wrpc.IsNotFound(err) || errors.Is(err, wrpc.ErrPermissionDenied) || ctx.Err() != nil {
			return 0, err
		}
		if a+1 < attempts && !sleep(ctx, backoff) {
			return 0, ctx.Err()
		}
	}
	return 0, err
}

func (t *ReduceTask) fetchOnce(ctx context.Context, f Feed, path string) (int64, error) {
	out, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer out.Close()
	ci := wrpc.ContainerInfo{ID: f.ContainerID, NodeAddress: f.NodeAddress}
	var off int64
	for {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		resp, err := t.Fetch.ContainerOutput(cctx, ci, wrpc.ContainerOutputRequest{Path: mapPartitionPath(t.Partition), Offset: off})
		cancel()
		if err != nil {
			return 0, err
		}
		if _, err := out.Write(resp.Data); err != nil {
			return 0, err
		}
		off = resp.NextOffset
		if off >= resp.Size || len(resp.Data) == 0 {
			if off != resp.Size {
				return 0, fmt.Errorf("read %d bytes of %d", off, resp.Size)
			}
			return off, out.Close()
		}
	}
}

// reduce merges the sorted runs into the reduce command's stdin and
// writes its stdout to the output file, which appears whole or not at all.
func (t *ReduceTask) reduce(ctx context.Context, runs []string) error {
	final := filepath.Join(t.Output, reduceOutputName(t.Partition))
	if err := os.MkdirAll(t.Output, 0o755); err != nil {
		return fmt.Errorf("output: %w", err)
	}
	tmp, err := os.CreateTemp(t.Output, "."+reduceOutputName(t.Partition)+".tmp-*")
	if err != nil {
		return fmt.Errorf("output: %w", err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	cmd := exec.CommandContext(ctx, t.Command[0], t.Command[1:]...)
	cmd.Stdout, cmd.Stderr = tmp, t.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("reduce command: %w", err)
	}
	mergeErr := mergeRuns(runs, t.Dir, stdin)
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("reduce command: %w", err)
	}
	if mergeErr != nil && !errors.Is(mergeErr, syscall.EPIPE) { // a command may stop reading early
		return fmt.Errorf("merge: %w", mergeErr)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), final)
}

// mergeFanIn is how many runs one merge pass reads at once: a reduce of
// thousands of maps must not hold thousands of files open.
const mergeFanIn = 64

// mergeRuns writes the lines of the sorted runs to w in key order (stable:
// runs earlier in the list first for equal keys). More than mergeFanIn
// runs are merged in passes through files in dir.
func mergeRuns(runs []string, dir string, w io.Writer) error {
	for pass := 0; len(runs) > mergeFanIn; pass++ {
		var next []string
		for i := 0; i < len(runs); i += mergeFanIn {
			group := runs[i:min(i+mergeFanIn, len(runs))]
			path := filepath.Join(dir, fmt.Sprintf("merge-%d-%d", pass, i/mergeFanIn))
			f, err := os.Create(path)
			if err != nil {
				return err
			}
			bw := bufio.NewWriterSize(f, 256<<10)
			if err := mergeOnce(group, bw); err == nil {
				err = bw.Flush()
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
			next = append(next, path)
		}
		runs = next
	}
	bw := bufio.NewWriterSize(w, 256<<10)
	if err := mergeOnce(runs, bw); err != nil {
		return err
	}
	return bw.Flush()
}

func mergeOnce(runs []string, w *bufio.Writer) error {
	h := &runHeap{}
	for i, path := range runs {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), maxRecord+1)
		r := &run{order: i, sc: sc}
		if ok, err := r.next(); err != nil {
			return err
		} else if ok {
			h.runs = append(h.runs, r)
		}
	}
	heap.Init(h)
	for h.Len() > 0 {
		r := h.runs[0]
		if _, err := w.Write(r.line); err != nil {
			return err
		}
		if err := w.WriteByte('\n'); err != nil {
			return err
		}
		ok, err := r.next()
		if err != nil {
			return err
		}
		if ok {
			heap.Fix(h, 0)
		} else {
			heap.Pop(h)
		}
	}
	return nil
}

// run is one sorted file being merged.
type run struct {
	order int
	sc    *bufio.Scanner
	line  []byte
	key   []byte
}

func (r *run) next() (bool, error) {
	if !r.sc.Scan() {
		return false, r.sc.Err()
	}
	r.line = r.sc.Bytes()
	r.key = splitKey(r.line)
	return true, nil
}

type runHeap struct{ runs []*run }

func (h *runHeap) Len() int { return len(h.runs) }
func (h *runHeap) Less(i, j int) bool {
	if c := bytes.Compare(h.runs[i].key, h.runs[j].key); c != 0 {
		return c < 0
	}
	return h.runs[i].order < h.runs[j].order
}
func (h *runHeap) Swap(i, j int) { h.runs[i], h.runs[j] = h.runs[j], h.runs[i] }
func (h *runHeap) Push(x any)    { h.runs = append(h.runs, x.(*run)) }
func (h *runHeap) Pop() any {
	r := h.runs[len(h.runs)-1]
	h.runs = h.runs[:len(h.runs)-1]
	return r
}
