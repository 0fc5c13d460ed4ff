package rpc

import (
	"math/bits"
	"sync"
)

// Pooled byte buffers in power-of-two size classes from 4 KiB to 1 MiB, so
// that reading or writing a large message reuses buffers instead of
// allocating one per doubling. Larger buffers are left to the garbage
// collector.
const (
	minBufClass = 12 // 4 KiB
	maxBufClass = 20 // 1 MiB
)

var bufPools [maxBufClass + 1]sync.Pool

// bufBoxes holds empty *[]byte boxes: the pools keep buffers in boxes, and
// reusing the boxes spares an allocation for every buffer given back.
var bufBoxes = sync.Pool{New: func() any { return new([]byte) }}

// getBuf returns a buffer of length at least size (its whole capacity).
func getBuf(size int) []byte {
	class := max(bits.Len(uint(max(size, 1)-1)), minBufClass)
	if class > maxBufClass {
		return make([]byte, size)
	}
	if p, ok := bufPools[class].Get().(*[]byte); ok {
		b := (*p)[:cap(*p)]
		*p = nil
		bufBoxes.Put(p)
		return b
	}
	return make([]byte, 1<<class)
}

// bufSize is the length of the buffer getBuf(size) returns.
func bufSize(size int) int64 {
	class := max(bits.Len(uint(max(size, 1)-1)), minBufClass)
	if class > maxBufClass {
		return int64(size)
	}
	return 1 << class
}

// putBuf gives b back for reuse; b must not be used afterwards.
func putBuf(b []byte) {
	c := cap(b)
	if c < 1<<minBufClass || c > 1<<maxBufClass || c&(c-1) != 0 {
		return // not one of ours
	}
	p := bufBoxes.Get().(*[]byte)
	*p = b[:c]
	bufPools[bits.Len(uint(c))-1].Put(p)
}
