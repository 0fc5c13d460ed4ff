package rpc

// A request's credential — the caller's ACL token, or for the AM and
// container-management protocols its workload token — travels in its body
// and, from weft's clients, in its net/rpc header too (AuthToken), so that
// a server checks it before it reads the body (Server.ServeConn). A request
// whose header names a credential must carry the same one in its body.

// credentialed is a request that carries a credential.
type credentialed interface {
	credential() string
}

// credentialOf returns the credential a request body carries, or "".
func credentialOf(body any) string {
	if c, ok := body.(credentialed); ok {
		return c.credential()
	}
	return ""
}

func (h *RequestHeader) credential() string { return h.AuthToken }

// The workload requests' credential is their token.

func (r *AMRegisterRequest) credential() string      { return r.Token }
func (r *AMAllocateRequest) credential() string      { return r.Token }
func (r *AMFinishRequest) credential() string        { return r.Token }
func (r *ContainerStartRequest) credential() string  { return r.Token }
func (r *ContainerIDRequest) credential() string     { return r.Token }
func (r *ContainerStatusRequest) credential() string { return r.Token }
func (r *ContainerLogsRequest) credential() string   { return r.Token }
func (r *ContainerOutputRequest) credential() string { return r.Token }
