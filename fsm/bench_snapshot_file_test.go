package fsm

import (
	"bytes"
	"io"
	"os"
	"runtime"
	"testing"
	"time"
)

// The file benchmarks restore (and persist again) a snapshot read from
// the file WEFT_BENCH_SNAPSHOT: a real server's, or the benchmark state's
// (WEFT_BENCH_SNAPSHOT_WRITE=PATH with -bench SnapshotPersist1M writes
// it). Each starts from a snapshot in memory without building the state,
// so one process can measure one restore, and binaries of different
// commits can be compared on the same file. They are skipped without the
// variable.
func benchSnapshotFile(b *testing.B) []byte {
	path := os.Getenv("WEFT_BENCH_SNAPSHOT")
	if path == "" {
		b.Skip("WEFT_BENCH_SNAPSHOT names no snapshot file")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// BenchmarkSnapshotRestoreFile measures Restore of the file's snapshot,
// and reports separately the CPU of the one collection that follows it
// (gc-after-cpu-s: a restore leaves that much marking to do) and the heap
// the restored state holds (live-MB).
func BenchmarkSnapshotRestoreFile(b *testing.B) {
	data := benchSnapshotFile(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	cpu := cpuTime(b)
	var f *FSM
	var gcCPU time.Duration
	for i := 0; i < b.N; i++ {
		f = New(nil)
		if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		start := cpuTime(b)
		runtime.GC()
		gcCPU += cpuTime(b) - start
		b.StartTimer()
	}
	cpu += gcCPU
	reportCPU(b, cpu)
	b.ReportMetric(gcCPU.Seconds()/float64(b.N), "gc-after-cpu-s")
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "live-MB")
	runtime.KeepAlive(f)
}

// BenchmarkSnapshotPersistFile restores the file's snapshot once, then
// measures writing the state in the current format.
func BenchmarkSnapshotPersistFile(b *testing.B) {
	data := benchSnapshotFile(b)
	f := New(nil)
	if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		b.Fatal(err)
	}
	benchPersist(b, f.State())
}
