package rpc

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestCallRunsTheHandlerWithCodedErrorsAndPanicsContained(t *testing.T) {
	s := newRPCServer("a", hclog.NewNullLogger())
	ctx := context.Background()
	var reply EchoReply
	if err := s.Call(ctx, "Echo.Echo", &EchoArgs{Text: "hi", Blob: []byte("abc")}, &reply); err != nil || reply.Text != "hi" || reply.Size != 3 || reply.From != "a" {
		t.Fatalf("Echo.Echo = %+v, %v", reply, err)
	}
	if err := s.Call(ctx, "Echo.NotFound", &EchoArgs{Text: "x"}, &reply); !errors.Is(err, ErrNotFound) || err.Error() != "thing x not found" {
		t.Fatalf("Echo.NotFound = %#v", err)
	}
	if err := s.Call(ctx, "Echo.Panic", &EchoArgs{}, &reply); !errors.Is(err, ErrInternal) {
		t.Fatalf("Echo.Panic = %#v, want an internal error", err)
	}
	if err := s.Call(ctx, "Echo.Nope", &EchoArgs{}, &reply); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown method = %#v", err)
	}
	if err := s.Call(ctx, "Echo.Echo", &EchoReply{}, &reply); !errors.Is(err, ErrInternal) {
		t.Fatalf("wrong request type = %#v", err)
	}
	if err := s.Call(ctx, "Echo.Echo", &EchoArgs{}, &struct{}{}); !errors.Is(err, ErrInternal) {
		t.Fatalf("wrong reply type = %#v", err)
	}
}

func TestCallMarksTheCallerAnHTTPClient(t *testing.T) {
	s := NewServer(nil)
	var seen *ConnInfo
	var authorized []string
	s.Authorize = func(ctx context.Context, method string, c Capability, args any) (context.Context, error) {
		authorized = append(authorized, method)
		if args.(*EchoArgs).Text == "deny" {
			return nil, Errorf(CodePermissionDenied, "%w: no", ErrPermissionDenied)
		}
		return ctx, nil
	}
	peer := func(ctx context.Context, args *EchoArgs, reply *EchoReply) error {
		seen = ConnInfoFrom(ctx)
		return nil
	}
	Register(s, "Echo.Public", CapPublic, peer)
	Register(s, "Echo.Server", CapServer, peer)
	Register(s, "Echo.Agent", CapAgent, peer)
	Register(s, "Echo.Workload", CapWorkload, peer)

	addr := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 4242}
	ctx := WithConnInfo(context.Background(), &ConnInfo{RemoteAddr: addr})
	var reply EchoReply
	if err := s.Call(ctx, "Echo.Public", &EchoArgs{}, &reply); err != nil {
		t.Fatalf("public method: %v", err)
	}
	if seen == nil || !seen.HTTP || seen.RemoteAddr != addr {
		t.Fatalf("handler saw connection %+v, want the HTTP client at %v", seen, addr)
	}
	if err := s.Call(ctx, "Echo.Public", &EchoArgs{Text: "deny"}, &reply); !errors.Is(err, ErrPermissionDenied) {
		t.Fatalf("authorizer's refusal = %#v", err)
	}
	// Even without a connection in ctx (and so without TLS), an HTTP
	// client is never taken for a server, an agent or a workload.
	authorized = nil
	for _, m := range []string{"Echo.Server", "Echo.Agent", "Echo.Workload"} {
		seen = nil
		err := s.Call(context.Background(), m, &EchoArgs{}, &reply)
		if !errors.Is(err, ErrPermissionDenied) || !strings.Contains(err.Error(), "not for HTTP clients") || seen != nil {
			t.Fatalf("%s over HTTP = %v (handler ran: %v)", m, err, seen != nil)
		}
	}
	if len(authorized) != 0 {
		t.Fatalf("authorizer ran for refused methods %v", authorized)
	}
}
