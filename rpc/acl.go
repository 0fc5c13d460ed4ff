package rpc

import "github.com/weft-sched/weft/acl"

// ACLToken is a token as the ACL methods show it. SecretID is set only in
// the answer that created the token (and to `acl token self`): the
// servers keep only its hash.
type ACLToken struct {
	AccessorID  string   `codec:"accessor_id" json:"accessor_id"`
	SecretID    string   `codec:"secret_id" json:"secret_id,omitempty"`
	Name        string   `codec:"name" json:"name"`
	Type        string   `codec:"type" json:"type"`
	Policies    []string `codec:"policies" json:"policies"`
	ExpiresAt   int64    `codec:"expires_at" json:"expires_at,omitempty"`
	CreateTime  int64    `codec:"create_time" json:"create_time"`
	CreateIndex uint64   `codec:"create_index" json:"create_index"`
	ModifyIndex uint64   `codec:"modify_index" json:"modify_index"`
}

// NewACLToken is the view of a stored token (without its secret).
func NewACLToken(t *acl.Token) ACLToken {
	return ACLToken{AccessorID: t.AccessorID, Name: t.Name, Type: t.Type, Policies: append([]string{}, t.Policies...),
		ExpiresAt: t.ExpiresAt, CreateTime: t.CreateTime, CreateIndex: t.CreateIndex, ModifyIndex: t.ModifyIndex}
}

// ACLBootstrapRequest creates the first management token (ACL.Bootstrap).
// The client picks the token's IDs (NewACLIDs), so that a retried
// bootstrap is answered with the token it created; a server fills in any
// left empty.
type ACLBootstrapRequest struct {
	RequestHeader
	AccessorID string `codec:"accessor_id" json:"-"`
	SecretID   string `codec:"secret_id" json:"-"`
}

// ACLTokenCreateRequest creates a token (ACL.TokenCreate). IDs as for
// ACLBootstrapRequest.
type ACLTokenCreateRequest struct {
	RequestHeader
	Name     string   `codec:"name" json:"name"`
	Type     string   `codec:"type" json:"type"`
	Policies []string `codec:"policies" json:"policies"`
	// TTL, if not 0, makes the token expire that long after it is created.
	TTL        Duration `codec:"ttl" json:"ttl"`
	AccessorID string   `codec:"accessor_id" json:"-"`
	SecretID   string   `codec:"secret_id" json:"-"`
}

// ACLTokenResponse answers a method about one token.
type ACLTokenResponse struct {
	ResponseMeta
	Token ACLToken `codec:"token" json:"token"`
}

// ACLTokenListResponse answers ACL.TokenList.
type ACLTokenListResponse struct {
	ResponseMeta
	Tokens []ACLToken `codec:"tokens" json:"tokens"`
}

// ACLTokenRequest names a token by accessor ID (ACL.TokenInfo,
// ACL.TokenDelete).
type ACLTokenRequest struct {
	RequestHeader
	AccessorID string `codec:"accessor_id" json:"accessor_id"`
}

// ACLPolicy is a policy as the ACL methods show it.
type ACLPolicy struct {
	Name        string `codec:"name" json:"name"`
	Description string `codec:"description" json:"description,omitempty"`
	Rules       string `codec:"rules" json:"rules"`
	CreateIndex uint64 `codec:"create_index" json:"create_index"`
	ModifyIndex uint64 `codec:"modify_index" json:"modify_index"`
}

// ACLPolicyApplyRequest creates or replaces a policy (ACL.PolicyApply).
type ACLPolicyApplyRequest struct {
	RequestHeader
	Policy ACLPolicy `codec:"policy" json:"policy"`
}

// ACLPolicyRequest names a policy (ACL.PolicyInfo, ACL.PolicyDelete).
type ACLPolicyRequest struct {
	RequestHeader
	Name string `codec:"name" json:"name"`
}

// ACLPolicyResponse answers ACL.PolicyInfo.
type ACLPolicyResponse struct {
	ResponseMeta
	Policy ACLPolicy `codec:"policy" json:"policy"`
}

// ACLPolicyListResponse answers ACL.PolicyList.
type ACLPolicyListResponse struct {
	ResponseMeta
	Policies []ACLPolicy `codec:"policies" json:"policies"`
}

// NewACLIDs returns a fresh accessor ID and secret ID for a token a client
// is about to create.
func NewACLIDs() (accessor, secret string) { return acl.NewID(), acl.NewID() }

// ACLAuthorizeRequest asks whether the caller's token grants a capability
// (ACL.Authorize): how a federation's routers, which hold no ACLs, check
// the tokens given for their own methods against a sub-cluster's.
type ACLAuthorizeRequest struct {
	RequestHeader
	Capability Capability `codec:"capability" json:"capability"`
	// Queue names the queue for queue:read and queue:submit; without one
	// they ask for that level on some queue.
	Queue string `codec:"queue" json:"queue"`
}

// ACLAuthorizeResponse answers ACL.Authorize: the capability is granted,
// and whether by a management token.
type ACLAuthorizeResponse struct {
	Management bool `codec:"management" json:"management"`
}
