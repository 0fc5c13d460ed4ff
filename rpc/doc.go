// Package rpc is weft's wire: the msgpack codec with its limits (a
// request's header is read first and the caller checked before its body:
// the body is bounded in bytes by its method and by what the caller proved,
// and before it is decoded in what decoding it would allocate), the
// first-byte connection types that let one TCP port carry RPC and Raft (in
// the clear, or inside mutual TLS where the peer's certificate role is
// checked: only servers open Raft, RequireRole guards endpoints), the
// capability every method declares and the hooks that authorize it
// (Capability, Server.AuthorizeHeader before the body, Server.Authorize
// after), the listener's limits on what one client — a source IP and the
// role its certificate proved — may hold (connections, a deadline until
// the first whole request, an idle timeout, streams per multiplexed
// connection, and its share of the one budget of memory a process holds
// for requests, memory.go; and how fast it is read once it owes for
// refused bytes, refusals.go), the server-side dispatcher (Server: a context per request that carries its
// connection and the caller's deadline, errors coded so they survive the
// wire, handler panics contained; Server.Call runs the same path in
// process for the HTTP API, whose clients hold no certificate), a pool of yamux-multiplexed connections
// (idle streams kept for the next burst of calls; codecs that hold a pooled
// buffer only while a message is in flight; a session on which a call went
// unanswered kept while the server answers a ping; idle sessions closed),
// a client that bounds every attempt, fails over across servers at once and
// gives every write a request ID, and every request and response type that
// crosses a process boundary (the AM and container-management protocols'
// client side included).
//
// Types here are the protocol: every field names its msgpack name with a
// codec tag (snake_case, stable), apart from the JSON the CLI prints. The
// package never holds cluster state and never decides anything; it must not
// import fsm, server or agent.
package rpc
