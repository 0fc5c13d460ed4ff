// Package acl is weft's access control (SPEC §15): ACL policies written in
// HCL, tokens that name policies, and the compiled ACL a request is checked
// against. Default deny: a token may do what one of its policies grants
// and nothing else; a management token may do everything.
//
// The package is pure: it parses, compiles and answers questions. It never
// holds cluster state, reads a clock or talks to the network; the servers
// keep tokens and policies in the replicated state and resolve a request's
// token to an ACL.
package acl
