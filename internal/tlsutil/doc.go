// Package tlsutil is weft's mutual TLS (SPEC §15): it makes a certificate
// authority and the certificates it signs (`weft tls ca create`, `weft tls
// cert create`), and turns a CA file, a certificate and a key into the
// *tls.Config of a listener or of a dialer.
//
// A weft certificate names its holder's role in one DNS SAN,
// `<role>.<region>.weft`, with role one of server, agent, router or client.
// Peers check that name: a dialer that needs a server verifies the
// `server.<region>.weft` SAN (OutgoingConfig), a listener learns the role a
// verified client certificate holds (PeerRole) and callers decide what that
// role may do. Certificates of another region, or signed by another CA,
// never verify.
//
// A Configurator holds the files' contents behind an atomic pointer, so
// Reload (on SIGHUP) swaps them without a pause, and a bad file leaves the
// old ones in use. Every handshake reads the current pair.
//
// The package never opens a connection and never decides what a role may
// do: that is the rpc layer's and the endpoints' business. It never writes
// over an existing file.
package tlsutil
