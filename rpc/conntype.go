package rpc

import "time"

// ConnType is the first byte a client writes on a new connection to a
// server's RPC port; it selects what the rest of the connection carries.
type ConnType byte

// Connection types of SPEC §2. Any other first byte closes the connection.
const (
	ConnRPC       ConnType = 0x01 // one msgpack RPC stream
	ConnRaft      ConnType = 0x02 // Raft's network transport
	ConnMultiplex ConnType = 0x03 // yamux session; every stream is msgpack RPC
	ConnTLS       ConnType = 0x04 // TLS, then one of the above (see Listener.UseTLS)
)

// HandshakeTimeout bounds how long a server waits for the first byte of a
// new connection and, for ConnTLS, for the whole TLS handshake and the
// inner type byte.
const HandshakeTimeout = 5 * time.Second
