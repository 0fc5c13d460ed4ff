package server

import (
	"context"
	"fmt"
	"time"

	wrpc "github.com/weft-sched/weft/rpc"
)

// peerCheckTimeout bounds the call that checks a would-be Raft peer.
const peerCheckTimeout = 3 * time.Second

// verifyServerPeer checks, with TLS on, that the serf member p is what it
// claims before it enters the Raft configuration (SPEC §15: only a member
// with a server certificate is reconciled into it): its RPC address must
// prove it holds a server certificate (the pool to servers dials only
// such peers), and the server answering there must be p.ID, so that no
// gossip member can pass off a real server's address as its own. Without
// TLS it checks nothing: gossip alone decides, as before.
func (s *Server) verifyServerPeer(p serverMember) error {
	if s.config.TLS == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), peerCheckTimeout)
	defer cancel()
	var st wrpc.SelfResponse
	if err := s.pool.Call(ctx, p.RPCAddr, "Status.Self", &wrpc.RequestHeader{AllowStale: true}, &st); err != nil {
		return fmt.Errorf("no server certificate proven at %s: %w", p.RPCAddr, err)
	}
	if st.ID != p.ID {
		return fmt.Errorf("the server at %s is %q, not %q as gossip says", p.RPCAddr, st.ID, p.ID)
	}
	return nil
}
