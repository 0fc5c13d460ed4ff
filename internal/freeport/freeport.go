// Package freeport finds ports for the servers that tests and `weft sim`
// start as real processes, which must be told their ports before they bind.
//
// A port the kernel picks (listening on port 0) comes from its ephemeral
// range, the same range outgoing connections take their local ports from:
// between closing the probe and the server's bind, any connection on the
// host may take it, and the server then fails with "address already in
// use". On a machine busy with tests that open thousands of connections
// that happens. Take therefore picks ports below the ephemeral range, which
// no outgoing connection uses, and never hands out the same port twice in
// one process.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// lowest is the lowest port Take picks: above the well-known and most
// commonly configured service ports.
const lowest = 10000

// attempts is how many ports Take tries before giving up.
const attempts = 500

var (
	mu    sync.Mutex
	given = map[int]bool{} // ports Take returned in this process
)

// Take returns a port that is free for TCP and UDP on every one of ips
// (127.0.0.1 if none is given) and that Take has not returned before in
// this process.
func Take(ips ...string) (int, error) {
	if len(ips) == 0 {
		ips = []string{"127.0.0.1"}
	}
	lo, hi := span(ephemeralStart())
	mu.Lock()
	defer mu.Unlock()
	for range attempts {
		port := lo + rand.IntN(hi-lo)
		if !given[port] && free(port, ips) {
			given[port] = true
			return port, nil
		}
	}
	return 0, fmt.Errorf("freeport: no port in %d-%d is free on %s", lo, hi-1, strings.Join(ips, ", "))
}

// span is the ports [lo, hi) Take picks from when the ephemeral range
// starts at ephemeral: those below it, or, on a host whose ephemeral range
// leaves too few there, those above the well-known ports (and collisions
// with outgoing connections become possible again).
func span(ephemeral int) (lo, hi int) {
	if ephemeral-lowest >= 1000 {
		return lowest, ephemeral
	}
	return 1024, 65536
}

// ephemeralStart is the first port of the kernel's ephemeral range: Linux's
// setting where it can be read, else its default.
func ephemeralStart() int {
	const linuxDefault = 32768
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return linuxDefault
	}
	fields := strings.Fields(string(raw))
	if len(fields) == 0 {
		return linuxDefault
	}
	start, err := strconv.Atoi(fields[0])
	if err != nil || start <= 0 {
		return linuxDefault
	}
	return start
}

// free reports whether port can be bound for TCP and UDP on every ip.
func free(port int, ips []string) bool {
	var open []interface{ Close() error }
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	for _, ip := range ips {
		addr := net.JoinHostPort(ip, strconv.Itoa(port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return false
		}
		open = append(open, ln)
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return false
		}
		open = append(open, pc)
	}
	return true
}
