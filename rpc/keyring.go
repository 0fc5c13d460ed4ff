package rpc

// KeyringRequest names a gossip encryption key (SPEC §15) for
// Operator.KeyringInstall, Operator.KeyringUse and Operator.KeyringRemove;
// Operator.KeyringList takes it with Key empty.
type KeyringRequest struct {
	RequestHeader
	// Key is a gossip key: the base64 of 32 bytes.
	Key string `codec:"key" json:"-"`
}

// GossipKey is one gossip encryption key and how many members hold it.
type GossipKey struct {
	Key string `codec:"key" json:"key"`
	// Members is how many members have the key in their keyring.
	Members int `codec:"members" json:"members"`
	// PrimaryMembers is how many members encrypt what they send with it.
	PrimaryMembers int `codec:"primary_members" json:"primary_members"`
}

// KeyringResponse answers every Operator.Keyring method with what the
// live members of the gossip pool (servers and agents) answered when the
// answering server called each (Gossip.Keyring). A member that failed or
// could not be reached is counted and named here; the call itself fails
// only when the keyring cannot be changed at all (gossip not started, or
// in plaintext).
type KeyringResponse struct {
	// Keys lists every key some member holds, sorted (KeyringList only).
	Keys []GossipKey `codec:"keys" json:"keys"`
	// Members is how many live members the answering server knew of.
	Members int `codec:"members" json:"members"`
	// Responses is how many members answered (in time, over mutual TLS).
	Responses int `codec:"responses" json:"responses"`
	// Failed is how many of them answered with an error.
	Failed int `codec:"failed" json:"failed"`
	// Messages maps a member's name to the error, or warning, it answered.
	Messages map[string]string `codec:"messages" json:"messages,omitempty"`
}

// Complete reports whether every member answered and none failed.
func (r *KeyringResponse) Complete() bool { return r.Failed == 0 && r.Responses >= r.Members }

// GossipKeyringRequest asks one member of the gossip pool to list or
// change its own keyring (Gossip.Keyring, a server's certificate only; a
// router's among routers): the server answering an operator's keyring
// command calls every member with it.
type GossipKeyringRequest struct {
	RequestHeader
	// Op is "list", "install", "use" or "remove".
	Op string `codec:"op" json:"op"`
	// Key is a gossip key (the base64 of 32 bytes); empty to list.
	Key string `codec:"key" json:"-"`
}

// GossipKeyringResponse is a member's keyring after the operation.
type GossipKeyringResponse struct {
	// Keys are the keys the member holds, its primary key first.
	Keys []string `codec:"keys" json:"-"`
}
