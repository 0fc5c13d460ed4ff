package fsm

import (
	"bytes"
	"io"
	"reflect"
	"testing"

	"github.com/weft-sched/weft/acl"
)

func newToken(name, typ string, policies ...string) (*acl.Token, string) {
	secret := acl.NewID()
	return &acl.Token{AccessorID: acl.NewID(), SecretHash: acl.HashSecret(secret), Name: name, Type: typ, Policies: policies}, secret
}

func TestACLBootstrapOnce(t *testing.T) {
	h := newHarness(t)
	tok, secret := newToken("bootstrap", acl.TypeManagement)
	h.ok(ACLBootstrapType, &ACLBootstrapRequest{Token: tok})
	st := h.f.State()
	got, ok := st.ACLTokenBySecret(secret)
	if !ok || got.AccessorID != tok.AccessorID || got.Type != acl.TypeManagement || st.ACLBootstrapIndex() != h.index {
		t.Fatalf("bootstrap token not stored: %+v %v index %d", got, ok, st.ACLBootstrapIndex())
	}
	if _, ok := st.ACLTokenBySecret(acl.NewID()); ok {
		t.Fatal("an unknown secret resolved")
	}
	again, _ := newToken("bootstrap", acl.TypeManagement)
	h.refused(ACLBootstrapType, &ACLBootstrapRequest{Token: again}, "bootstrapped already")
	client, _ := newToken("x", acl.TypeClient)
	h.refused(ACLBootstrapType, &ACLBootstrapRequest{Token: client}, "bootstrapped already")
}

func TestACLPoliciesAndTokens(t *testing.T) {
	h := newHarness(t)
	tok, _ := newToken("alice", acl.TypeClient, "dev")
	h.refused(ACLTokenUpsertType, &ACLTokenUpsertRequest{Tokens: []*acl.Token{tok}}, `policy "dev" does not exist`)
	h.refused(ACLPolicyUpsertType, &ACLPolicyUpsertRequest{Policies: []*acl.Policy{{Name: "dev", Rules: `queue "root.dev" { policy = "sumbit" }`}}}, `policy dev: dev.hcl:1,29: queue "root.dev": policy "sumbit"`)
	h.ok(ACLPolicyUpsertType, &ACLPolicyUpsertRequest{Policies: []*acl.Policy{{Name: "dev", Description: "developers", Rules: `queue "root.dev" { policy = "submit" }`}}})
	created := h.index
	p, ok := h.f.State().ACLPolicy("dev")
	if !ok || p.CreateIndex != created {
		t.Fatalf("policy not stored: %+v", p)
	}
	rules, err := p.Parsed()
	if err != nil || rules.Queues[0].Level != acl.LevelSubmit {
		t.Fatalf("parsed rules: %+v %v", rules, err)
	}
	h.ok(ACLPolicyUpsertType, &ACLPolicyUpsertRequest{Policies: []*acl.Policy{{Name: "dev", Rules: `queue "root.dev" { policy = "admin" }`}}})
	if p, _ := h.f.State().ACLPolicy("dev"); p.CreateIndex != created || p.ModifyIndex != h.index {
		t.Fatalf("policy update must keep its create index: %+v", p)
	}

	h.ok(ACLTokenUpsertType, &ACLTokenUpsertRequest{Tokens: []*acl.Token{tok}})
	// An update keeps the secret whatever hash it carries.
	upd := *tok
	upd.SecretHash = acl.HashSecret("other")
	upd.Name = "alice2"
	h.ok(ACLTokenUpsertType, &ACLTokenUpsertRequest{Tokens: []*acl.Token{&upd}})
	got, _ := h.f.State().ACLToken(tok.AccessorID)
	if got.Name != "alice2" || !reflect.DeepEqual(got.SecretHash, tok.SecretHash) {
		t.Fatalf("update changed the secret or not the name: %+v", got)
	}

	dup, _ := newToken("bob", acl.TypeClient, "dev")
	dup.SecretHash = tok.SecretHash
	h.refused(ACLTokenUpsertType, &ACLTokenUpsertRequest{Tokens: []*acl.Token{dup}}, "its secret is another token's")
	bad, _ := newToken("has space", acl.TypeClient, "dev")
	good, _ := newToken("carol", acl.TypeClient, "dev")
	h.refused(ACLTokenUpsertType, &ACLTokenUpsertRequest{Tokens: []*acl.Token{good, bad}}, "use letters")
	if _, ok := h.f.State().ACLToken(good.AccessorID); ok {
		t.Fatal("a refused command stored part of its tokens")
	}
	mgmtWithPolicy, _ := newToken("m", acl.TypeManagement, "dev")
	h.refused(ACLTokenUpsertType, &ACLTokenUpsertRequest{Tokens: []*acl.Token{mgmtWithPolicy}}, "management token has no policies")
	noPolicy, _ := newToken("n", acl.TypeClient)
	h.refused(ACLTokenUpsertType, &ACLTokenUpsertRequest{Tokens: []*acl.Token{noPolicy}}, "needs at least one")

	h.refused(ACLTokenDeleteType, &ACLTokenDeleteRequest{AccessorIDs: []string{tok.AccessorID, acl.NewID()}}, "does not exist")
	h.ok(ACLTokenDeleteType, &ACLTokenDeleteRequest{AccessorIDs: []string{tok.AccessorID}})
	if len(h.f.State().ACLTokens()) != 0 {
		t.Fatal("token not deleted")
	}
	if _, ok := h.f.State().acl.bySecret.Get(tok.SecretHash); ok {
		t.Fatal("secret index keeps a deleted token")
	}
	h.refused(ACLPolicyDeleteType, &ACLPolicyDeleteRequest{Names: []string{"nope"}}, "policy nope does not exist")
	h.ok(ACLPolicyDeleteType, &ACLPolicyDeleteRequest{Names: []string{"dev"}})
	if len(h.f.State().ACLPolicies()) != 0 {
		t.Fatal("policy not deleted")
	}
}

func TestACLSnapshotRestore(t *testing.T) {
	h := newHarness(t)
	boot, bootSecret := newToken("bootstrap", acl.TypeManagement)
	h.ok(ACLBootstrapType, &ACLBootstrapRequest{Token: boot})
	h.ok(ACLPolicyUpsertType, &ACLPolicyUpsertRequest{Policies: []*acl.Policy{{Name: "dev", Rules: "queue \"root.dev\" { policy = \"read\" }\nnode { policy = \"read\" }\n"}}})
	tok, secret := newToken("alice", acl.TypeClient, "dev")
	h.ok(ACLTokenUpsertType, &ACLTokenUpsertRequest{Tokens: []*acl.Token{tok}})
	data := persist(t, h.f)
	g := New(nil)
	if err := g.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	st := g.State()
	if st.ACLBootstrapIndex() != h.f.State().ACLBootstrapIndex() || st.TableIndex(TableACL) != h.index {
		t.Fatalf("bootstrap index %d table index %d", st.ACLBootstrapIndex(), st.TableIndex(TableACL))
	}
	for _, s := range []string{bootSecret, secret} {
		if _, ok := st.ACLTokenBySecret(s); !ok {
			t.Fatal("a token's secret does not resolve after restore")
		}
	}
	if !reflect.DeepEqual(st.ACLTokens(), h.f.State().ACLTokens()) {
		t.Fatal("tokens differ after restore")
	}
	p, _ := st.ACLPolicy("dev")
	if r, err := p.Parsed(); err != nil || r.Node != acl.LevelRead {
		t.Fatalf("restored policy rules: %+v %v", r, err)
	}
}
