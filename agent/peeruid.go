package agent

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
)

// Which container is calling? An AM, or a reduce task, reaches its own
// node's agent over TCP without a certificate; it proves its app with a
// token. A token can leak, so the agent also asks the kernel who is on
// the other end: both ends of a connection from this host are sockets of
// this host, and /proc/net/tcp (tcp6) lists every socket with the uid of
// its owner. A caller whose uid is not its app's (the uid the servers gave
// the app, or its user's account) is refused, whatever token it holds.

// procNetFiles are the socket tables peerUID reads.
var procNetFiles = [2]string{"/proc/net/tcp", "/proc/net/tcp6"}

// maxSocketLines bounds what peerUID reads of a socket table.
const maxSocketLines = 1 << 20

// peerUID returns the uid of the process whose socket is remote and is
// connected to local, if that socket is one of this host's (in this
// network namespace); false otherwise (a caller on another host).
func peerUID(remote, local net.Addr) (uint32, bool) {
	r, rok := remote.(*net.TCPAddr)
	l, lok := local.(*net.TCPAddr)
	if !rok || !lok {
		return 0, false
	}
	for _, path := range procNetFiles {
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		uid, ok := findSocketUID(f, r, l)
		f.Close()
		if ok {
			return uid, true
		}
	}
	return 0, false
}

// findSocketUID scans a /proc/net/tcp-format table for the socket whose
// local address is sock and whose remote address is peer, and returns its
// owner's uid.
func findSocketUID(table io.Reader, sock, peer *net.TCPAddr) (uint32, bool) {
	wantLocal, wantRemote := procAddr(sock), procAddr(peer)
	if wantLocal == "" || wantRemote == "" {
		return 0, false
	}
	sc := bufio.NewScanner(table)
	for n := 0; sc.Scan() && n < maxSocketLines; n++ {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid ...
		f := strings.Fields(sc.Text())
		if len(f) < 8 || !strings.EqualFold(f[1], wantLocal) || !strings.EqualFold(f[2], wantRemote) {
			continue
		}
		uid, err := strconv.ParseUint(f[7], 10, 32)
		if err != nil {
			return 0, false
		}
		return uint32(uid), true
	}
	return 0, false
}

// procAddr formats a as /proc/net/tcp{,6} does: the address as the
// kernel holds it (32-bit words in host byte order, in hex), a colon, the
// port in hex. IPv4 addresses are looked up in tcp, others in tcp6 (an
// IPv4 peer of an IPv6 socket appears there as ::ffff:a.b.c.d).
func procAddr(a *net.TCPAddr) string {
	var raw []byte
	if ip4 := a.IP.To4(); ip4 != nil {
		raw = ip4
	} else if ip16 := a.IP.To16(); ip16 != nil {
		raw = ip16
	} else {
		return ""
	}
	words := make([]byte, len(raw))
	for i := 0; i+4 <= len(raw); i += 4 {
		binary.NativeEndian.PutUint32(words[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	return strings.ToUpper(hex.EncodeToString(words)) + ":" + strings.ToUpper(strconv.FormatUint(uint64(a.Port)|1<<16, 16)[1:])
}
