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
// HTTP statuses, and bounds what one request may hold (body size, header
// time, requests in flight).
//
// It must never hold cluster state, decide anything itself, or dial the
// process's own RPC port; nor import the metrics or UI packages: their
// handlers are given to it (Config.Metrics, Config.UI).
package httpapi
