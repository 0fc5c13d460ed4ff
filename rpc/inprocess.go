package rpc

import (
	"context"
	"fmt"
	"reflect"
)

// WithConnInfo returns ctx carrying info as the connection of the
// requests made with it (ConnInfoFrom).
func WithConnInfo(ctx context.Context, info *ConnInfo) context.Context {
	return context.WithValue(ctx, connInfoKey{}, info)
}

// Call answers one request made in process on behalf of an HTTP client
// (the HTTP API, SPEC §16), through the same path as a request from the
// network: the capability check, the Authorize hook, the handler under
// the request's deadline, panics answered with ErrInternal, coded errors.
// The request's connection is the one ctx carries (WithConnInfo), always
// marked HTTP: such a client holds no certificate, so methods for servers,
// agents and workloads (CapServer, CapAgent, CapWorkload) are refused.
// args must be the method's request type (a pointer to it) and reply a
// pointer to its response type; on success *reply holds the answer.
func (s *Server) Call(ctx context.Context, method string, args, reply any) error {
	m := s.methods[method]
	if m == nil {
		return Errorf(CodeNotFound, "unknown method %q", method)
	}
	if got, want := reflect.TypeOf(args), reflect.PointerTo(m.reqType); got != want {
		return fmt.Errorf("%s: request is %v, not %v: %w", method, got, want, ErrInternal)
	}
	rv := reflect.ValueOf(reply)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("%s: reply must be a non-nil pointer, not %T: %w", method, reply, ErrInternal)
	}
	info := ConnInfo{}
	if ci := ConnInfoFrom(ctx); ci != nil {
		info = *ci
	}
	info.HTTP = true
	out, err := s.invoke(WithConnInfo(ctx, &info), method, m, args)
	if err != nil {
		return err
	}
	ov := reflect.ValueOf(out)
	if ov.Type() != rv.Type() {
		return fmt.Errorf("%s: reply is %T, not %T: %w", method, reply, out, ErrInternal)
	}
	rv.Elem().Set(ov.Elem())
	return nil
}
