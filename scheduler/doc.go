// Package scheduler is weft's domain model and the home of every scheduling
// policy: resource vectors, the queue tree and its configuration, and (as the
// scheduler grows) fair-share computation, DRF/fair/FIFO ordering, placement,
// preemption planning and opportunistic node selection.
//
// Every function here is a pure function of its inputs: a read-only state
// snapshot, a request and the current time passed in as a value. The package
// must never do I/O, start goroutines, take locks, read the clock, log, or
// import any other weft package. If a scheduler test needs a server, the
// boundary is in the wrong place.
package scheduler
