package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestTakeGivesBindablePortsBelowTheEphemeralRangeAndNeverTwice(t *testing.T) {
	start := ephemeralStart()
	lo, hi := span(start)
	seen := map[int]bool{}
	for range 50 {
		port, err := Take("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		if port < lo || port >= hi {
			t.Fatalf("port %d outside [%d, %d)", port, lo, hi)
		}
		if hi == start && port >= start {
			t.Fatalf("port %d is in the ephemeral range from %d", port, start)
		}
		if seen[port] {
			t.Fatalf("port %d given twice", port)
		}
		seen[port] = true
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("port %d: %v", port, err)
		}
		ln.Close()
	}
}

func TestABoundPortIsNotFree(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if free(ln.Addr().(*net.TCPAddr).Port, []string{"127.0.0.1"}) {
		t.Fatal("a port bound for TCP is reported free")
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if free(pc.LocalAddr().(*net.UDPAddr).Port, []string{"127.0.0.1"}) {
		t.Fatal("a port bound for UDP is reported free")
	}
}

func TestSpanLeavesTheEphemeralRangeWhenItCan(t *testing.T) {
	for _, c := range []struct{ ephemeral, lo, hi int }{
		{32768, lowest, 32768},
		{49152, lowest, 49152},
		{1024, 1024, 65536},
		{10500, 1024, 65536},
	} {
		if lo, hi := span(c.ephemeral); lo != c.lo || hi != c.hi {
			t.Errorf("span(%d) = [%d, %d); want [%d, %d)", c.ephemeral, lo, hi, c.lo, c.hi)
		}
	}
}
