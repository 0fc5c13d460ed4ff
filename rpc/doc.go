// Package rpc is weft's wire: the msgpack codec, the first-byte connection
// types that let one TCP port carry RPC and Raft, a pool of yamux-multiplexed
// connections, a client that finds and rotates across servers, and every
// request and response type that crosses a process boundary (including, as
// they come, the AM and container-management protocols' client side).
//
// Types here are the protocol: their msgpack (and JSON) field names are
// stable and snake_case. The package never holds cluster state and never
// decides anything; it must not import fsm, server or agent.
package rpc
