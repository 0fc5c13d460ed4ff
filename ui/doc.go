// Package ui is weft's web UI (SPEC §16): the HTML, CSS and JavaScript of
// the operator's pages — overview, queues, apps, nodes, containers and
// their logs — embedded in the binary and served under /ui/ by Handler.
//
// The pages read the cluster only through the JSON API under /v1/ (with
// the user's ACL token), in the browser; this package holds no cluster
// state, calls no endpoint and must never fetch anything from outside the
// binary: no CDN, no build step, no network at serve time.
package ui
