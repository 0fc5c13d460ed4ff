// Package httpapi is weft's JSON HTTP API (SPEC §16): the routes under
// /v1/ that servers serve on http_port, and the few an agent serves
// (health, metrics, its containers' logs). Each route names the RPC method
// it calls and the rpc.Capability that method declares (routes.go, one
// table); the handlers call the methods in process through a Caller
// (rpc.Server.Call on a server), so forwarding, consistency, ACLs and
// validation have one code path, and the bodies are the rpc package's
// JSON types, the same as the CLI's -json. It maps blocking queries
// (?index=&wait=), ?stale and the ACL token (X-Weft-Token or
// Authorization: Bearer) onto the request header, rpc error codes onto
// HTTP statuses, and answers HEAD as GET without the body. It bounds what
// a client may hold: before its token is checked (the process's own
// check, Config.Authenticate, which the method repeats), only its
// connections and headers, per source address; after, a slot among the
// requests in flight from its source (management tokens have their own)
// and, for a body, the route's cap and what parsing it may cost out of a
// byte budget (admit.go).
//
// It must never hold cluster state, decide anything itself, or dial the
// process's own RPC port; nor import the metrics or UI packages: their
// handlers are given to it (Config.Metrics, Config.UI).
package httpapi
