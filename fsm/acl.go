package fsm

import (
	"fmt"

	iradix "github.com/hashicorp/go-immutable-radix/v2"
	"github.com/weft-sched/weft/acl"
)

// ACL commands (SPEC §15). Tokens are stored with the SHA-256 of their
// secret, never the secret.

// ACLBootstrapRequest creates the first management token; it applies once
// in a cluster's life.
type ACLBootstrapRequest struct {
	Token *acl.Token `codec:"token"`
}

// ACLTokenUpsertRequest creates tokens, or updates existing ones (by
// accessor ID) keeping their secret.
type ACLTokenUpsertRequest struct {
	Tokens []*acl.Token `codec:"tokens"`
}

// ACLTokenDeleteRequest deletes tokens by accessor ID.
type ACLTokenDeleteRequest struct {
	AccessorIDs []string `codec:"accessor_ids"`
}

// ACLPolicyUpsertRequest creates or replaces policies by name.
type ACLPolicyUpsertRequest struct {
	Policies []*acl.Policy `codec:"policies"`
}

// ACLPolicyDeleteRequest deletes policies by name.
type ACLPolicyDeleteRequest struct {
	Names []string `codec:"names"`
}

// aclTables are the ACL part of the state: small, and written rarely.
type aclTables struct {
	tokens   *iradix.Tree[*acl.Token]  // accessor ID
	bySecret *iradix.Tree[*acl.Token]  // SHA-256 of the secret
	policies *iradix.Tree[*acl.Policy] // name
	// bootstrapIndex is the Raft index of the bootstrap, 0 before it.
	bootstrapIndex uint64
}

func newACLTables() aclTables {
	return aclTables{tokens: iradix.New[*acl.Token](), bySecret: iradix.New[*acl.Token](), policies: iradix.New[*acl.Policy]()}
}

// ACLTokenBySecret returns the token whose secret is secret.
func (s *State) ACLTokenBySecret(secret string) (*acl.Token, bool) {
	return s.acl.bySecret.Get(acl.HashSecret(secret))
}

// ACLToken returns a token by accessor ID.
func (s *State) ACLToken(accessor string) (*acl.Token, bool) {
	return s.acl.tokens.Get([]byte(accessor))
}

// ACLTokens returns every token in accessor ID order.
func (s *State) ACLTokens() []*acl.Token { return collect(s.acl.tokens, nil) }

// ACLPolicy returns a policy by name; its rules are parsed (Parsed never
// fails for a stored policy).
func (s *State) ACLPolicy(name string) (*acl.Policy, bool) {
	return s.acl.policies.Get([]byte(name))
}

// ACLPolicies returns every policy in name order.
func (s *State) ACLPolicies() []*acl.Policy { return collect(s.acl.policies, nil) }

// ACLBootstrapIndex returns the Raft index at which ACLs were
// bootstrapped, or 0.
func (s *State) ACLBootstrapIndex() uint64 { return s.acl.bootstrapIndex }

func (t *txn) applyACLBootstrap(req *ACLBootstrapRequest) error {
	if i := t.next.acl.bootstrapIndex; i != 0 {
		return reject(ErrConflict, "ACLs were bootstrapped already (at Raft index %d): use a management token to create others", i)
	}
	if req.Token == nil || req.Token.Type != acl.TypeManagement {
		return reject(ErrInvalid, "bootstrap: the token must be a management token")
	}
	if err := t.upsertTokens([]*acl.Token{req.Token}); err != nil {
		return err
	}
	t.next.acl.bootstrapIndex = t.index
	return nil
}

func (t *txn) applyACLTokenUpsert(req *ACLTokenUpsertRequest) error {
	return t.upsertTokens(req.Tokens)
}

// upsertTokens checks every token before storing any, so a command is
// applied whole or not at all.
func (t *txn) upsertTokens(tokens []*acl.Token) error {
	if len(tokens) == 0 {
		return reject(ErrInvalid, "tokens: none given")
	}
	tabs := &t.next.acl
	seen := map[string]bool{}
	stored := make([]*acl.Token, 0, len(tokens))
	for _, in := range tokens {
		if in == nil {
			return reject(ErrInvalid, "tokens: an empty token")
		}
		tok := *in
		tok.Policies = append([]string(nil), in.Policies...)
		if err := acl.ValidateID("accessor_id", tok.AccessorID); err != nil {
			return reject(ErrInvalid, "token: %v", err)
		}
		if seen[tok.AccessorID] {
			return reject(ErrInvalid, "token %s: given twice", tok.AccessorID)
		}
		seen[tok.AccessorID] = true
		if err := acl.ValidateName("name", tok.Name); err != nil {
			return reject(ErrInvalid, "token %s: %v", tok.AccessorID, err)
		}
		switch tok.Type {
		case acl.TypeManagement:
			if len(tok.Policies) > 0 {
				return reject(ErrInvalid, "token %s: a management token has no policies", tok.AccessorID)
			}
		case acl.TypeClient:
			if len(tok.Policies) == 0 {
				return reject(ErrInvalid, "token %s: policies: a client token needs at least one", tok.AccessorID)
			}
		default:
			return reject(ErrInvalid, "token %s: type must be client or management, not %q", tok.AccessorID, tok.Type)
		}
		for _, p := range tok.Policies {
			if _, ok := tabs.policies.Get([]byte(p)); !ok {
				return reject(ErrNotFound, "token %s: policy %q does not exist", tok.AccessorID, p)
			}
		}
		old, exists := tabs.tokens.Get([]byte(tok.AccessorID))
		if exists {
			tok.SecretHash, tok.CreateIndex, tok.CreateTime = old.SecretHash, old.CreateIndex, old.CreateTime
		} else {
			if len(tok.SecretHash) != 32 {
				return reject(ErrInvalid, "token %s: secret hash must be 32 bytes", tok.AccessorID)
			}
			if _, dup := tabs.bySecret.Get(tok.SecretHash); dup {
				return reject(ErrConflict, "token %s: its secret is another token's", tok.AccessorID)
			}
			tok.CreateIndex = t.index
		}
		tok.ModifyIndex = t.index
		stored = append(stored, &tok)
	}
	tx, sx := tabs.tokens.Txn(), tabs.bySecret.Txn()
	for _, tok := range stored {
		tx.Insert([]byte(tok.AccessorID), tok)
		sx.Insert(tok.SecretHash, tok)
	}
	tabs.tokens, tabs.bySecret = tx.CommitOnly(), sx.CommitOnly()
	t.touch(TableACL)
	return nil
}

func (t *txn) applyACLTokenDelete(req *ACLTokenDeleteRequest) error {
	tabs := &t.next.acl
	if len(req.AccessorIDs) == 0 {
		return reject(ErrInvalid, "accessor_ids: none given")
	}
	for _, id := range req.AccessorIDs {
		if _, ok := tabs.tokens.Get([]byte(id)); !ok {
			return reject(ErrNotFound, "token %s does not exist", id)
		}
	}
	tx, sx := tabs.tokens.Txn(), tabs.bySecret.Txn()
	for _, id := range req.AccessorIDs {
		if tok, ok := tx.Delete([]byte(id)); ok {
			sx.Delete(tok.SecretHash)
		}
	}
	tabs.tokens, tabs.bySecret = tx.CommitOnly(), sx.CommitOnly()
	t.touch(TableACL)
	return nil
}

func (t *txn) applyACLPolicyUpsert(req *ACLPolicyUpsertRequest) error {
	tabs := &t.next.acl
	if len(req.Policies) == 0 {
		return reject(ErrInvalid, "policies: none given")
	}
	stored := make([]*acl.Policy, 0, len(req.Policies))
	seen := map[string]bool{}
	for _, in := range req.Policies {
		if in == nil {
			return reject(ErrInvalid, "policies: an empty policy")
		}
		p := &acl.Policy{Name: in.Name, Description: in.Description, Rules: in.Rules}
		if err := acl.ValidateName("name", p.Name); err != nil {
			return reject(ErrInvalid, "policy: %v", err)
		}
		if seen[p.Name] {
			return reject(ErrInvalid, "policy %s: given twice", p.Name)
		}
		seen[p.Name] = true
		if len(p.Description) > 256 {
			return reject(ErrInvalid, "policy %s: description: at most 256 characters", p.Name)
		}
		rules, err := acl.ParseRules(p.Name+".hcl", []byte(p.Rules))
		if err != nil {
			return reject(ErrInvalid, "policy %s: %v", p.Name, err)
		}
		p.SetParsed(rules)
		p.CreateIndex = t.index
		if old, ok := tabs.policies.Get([]byte(p.Name)); ok {
			p.CreateIndex = old.CreateIndex
		}
		p.ModifyIndex = t.index
		stored = append(stored, p)
	}
	tx := tabs.policies.Txn()
	for _, p := range stored {
		tx.Insert([]byte(p.Name), p)
	}
	tabs.policies = tx.CommitOnly()
	t.touch(TableACL)
	return nil
}

func (t *txn) applyACLPolicyDelete(req *ACLPolicyDeleteRequest) error {
	tabs := &t.next.acl
	if len(req.Names) == 0 {
		return reject(ErrInvalid, "names: none given")
	}
	for _, n := range req.Names {
		if _, ok := tabs.policies.Get([]byte(n)); !ok {
			return reject(ErrNotFound, "policy %s does not exist", n)
		}
	}
	tx := tabs.policies.Txn()
	for _, n := range req.Names {
		tx.Delete([]byte(n))
	}
	tabs.policies = tx.CommitOnly()
	t.touch(TableACL)
	return nil
}

// aclMeta is the snapshot record of the ACL tables' own state.
type aclMeta struct {
	BootstrapIndex uint64 `codec:"bootstrap_index"`
}

// restoreACLPolicy checks and indexes a policy read from a snapshot.
func restoreACLPolicy(p *acl.Policy) error {
	rules, err := acl.ParseRules(p.Name+".hcl", []byte(p.Rules))
	if err != nil {
		return fmt.Errorf("policy %s: %w", p.Name, err)
	}
	p.SetParsed(rules)
	return nil
}
