package sim

import "syscall"

// OpenFilesFor is how many open files a simulation of nodes may need in
// one process: a connection per node to each server it has tried (a node
// that timed a heartbeat out tries the next, and keeps the first
// connection while it answers pings), its AMs', and slack. The servers a
// simulation starts hold their share of the same connections.
func OpenFilesFor(nodes int) uint64 { return uint64(4*nodes + 4096) }

// RaiseOpenFiles raises this process's open-file limit toward want (its
// children, such as the servers a simulation starts, inherit it): the soft
// limit up to the hard one, and the hard one too where the process may
// (root). It returns the limit in force. At 10,000 nodes a simulation
// under a limit of 20,000 ran out of descriptors, and every failed dial
// was retried at once: the retries, not the servers, took the machine.
func RaiseOpenFiles(want uint64) (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur >= want {
		return lim.Cur, nil
	}
	if lim.Max < want {
		raised := syscall.Rlimit{Cur: want, Max: want}
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised) == nil {
			return want, nil
		}
	}
	lim.Cur = min(want, lim.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	return lim.Cur, nil
}
