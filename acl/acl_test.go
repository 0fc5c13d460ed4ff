package acl

import (
	"strings"
	"testing"
)

func mustParse(t *testing.T, src string) *Rules {
	t.Helper()
	r, err := ParseRules("p.hcl", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestParseRules(t *testing.T) {
	r := mustParse(t, `
queue "root.prod.*" { policy = "read" }
queue "root.dev" {
  policy = "submit"
}
node { policy = "write" }
operator { policy = "read" }
acl = "write"
`)
	want := []QueueRule{{"root.prod.*", LevelRead}, {"root.dev", LevelSubmit}}
	if len(r.Queues) != 2 || r.Queues[0] != want[0] || r.Queues[1] != want[1] {
		t.Fatalf("queues = %+v", r.Queues)
	}
	if r.Node != LevelWrite || r.Operator != LevelRead || r.ACL != LevelWrite {
		t.Fatalf("node %v operator %v acl %v", r.Node, r.Operator, r.ACL)
	}
}

func TestParseRulesErrorsNameFileAndLine(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"queue \"root.dev\" { policy = \"writ\" }\n", `p.hcl:1,29: queue "root.dev": policy "writ" is not one of read, submit, admin, deny`},
		{"\nnode { policy = \"submit\" }\n", `p.hcl:2,17: node: policy "submit" is not one of read, write, deny`},
		{"acl = true\n", `p.hcl:1,7: acl: policy must be one of read, write, deny`},
		{"queue \"root.*.x\" { policy = \"read\" }\n", `'*' may only end a pattern`},
		{"queue \"root/x\" { policy = \"read\" }\n", `p.hcl:1,7: queue "root/x": pattern "root/x"`},
		{"queue \"a\" { policy = \"read\" }\nqueue \"a\" { policy = \"deny\" }\n", `p.hcl:2,1: queue "a" is given twice (first at line 1)`},
		{"queues \"a\" { policy = \"read\" }\n", `p.hcl:1,1: Unsupported block type`},
		{"queue \"a\" { }\n", `Missing required argument`},
		{"operator { policy = \"read\" }\noperator { policy = \"write\" }\n", `p.hcl:2,1: operator is given twice`},
		{"queue \"a\" { policy = \"read\"\n", `p.hcl:1`},
	} {
		_, err := ParseRules("p.hcl", []byte(tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseRules(%q) = %v, want an error containing %q", tc.src, err, tc.want)
		}
	}
	if _, err := ParseRules("big.hcl", make([]byte, MaxPolicySize+1)); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("oversized policy: %v", err)
	}
}

func TestQueueLevelMostSpecificRuleDecides(t *testing.T) {
	a := Compile(mustParse(t, `
queue "*" { policy = "read" }
queue "root.prod.*" { policy = "submit" }
queue "root.prod.secret" { policy = "deny" }
queue "root.prod.team.*" { policy = "admin" }
`))
	for path, want := range map[string]Level{
		"root":                 LevelRead,
		"root.dev":             LevelRead,
		"root.prod":            LevelRead, // "root.prod.*" is below root.prod only
		"root.prod.a":          LevelSubmit,
		"root.prod.secret":     LevelDeny,
		"root.prod.secret2":    LevelSubmit,
		"root.prod.team.x":     LevelAdmin,
		"root.prod.team.x.y.z": LevelAdmin,
	} {
		if got := a.QueueLevel(path); got != want {
			t.Errorf("QueueLevel(%s) = %v, want %v", path, got, want)
		}
	}
	if a.AllowQueue("root.prod.secret", LevelRead) {
		t.Error("deny must refuse even read")
	}
	if !a.AllowQueue("root.prod.team.x", LevelSubmit) || a.AllowQueue("root.prod.a", LevelAdmin) {
		t.Error("levels are ordered read < submit < admin")
	}
}

func TestCompileMergesPoliciesDenyWins(t *testing.T) {
	a := Compile(
		mustParse(t, "queue \"root.dev\" { policy = \"read\" }\nnode { policy = \"read\" }\n"),
		mustParse(t, "queue \"root.dev\" { policy = \"admin\" }\noperator { policy = \"write\" }\n"),
		mustParse(t, "queue \"root.ops\" { policy = \"submit\" }\nnode { policy = \"deny\" }\n"),
		mustParse(t, "queue \"root.ops\" { policy = \"deny\" }\n"),
	)
	if a.QueueLevel("root.dev") != LevelAdmin {
		t.Errorf("root.dev = %v, want the stronger grant admin", a.QueueLevel("root.dev"))
	}
	if a.QueueLevel("root.ops") != LevelDeny {
		t.Errorf("root.ops = %v, want deny to win", a.QueueLevel("root.ops"))
	}
	if a.AllowNode(LevelRead) {
		t.Error("node deny must win over node read")
	}
	if !a.AllowOperator(LevelWrite) || !a.AllowOperator(LevelRead) {
		t.Error("operator write implies read")
	}
	if a.AllowACL(LevelRead) {
		t.Error("no acl rule grants nothing")
	}
}

func TestDefaultDenyAndManagement(t *testing.T) {
	for _, a := range []*ACL{DenyAll, Compile()} {
		if a.AllowQueue("root", LevelRead) || a.AllowNode(LevelRead) || a.AllowOperator(LevelRead) || a.AllowACL(LevelRead) {
			t.Error("an empty ACL must grant nothing")
		}
	}
	m := Management
	if !m.AllowQueue("root.anything", LevelAdmin) || !m.AllowNode(LevelWrite) || !m.AllowOperator(LevelWrite) || !m.AllowACL(LevelWrite) || !m.IsManagement() {
		t.Error("management grants everything")
	}
}

// AllowAnyQueue is what a per-queue method can check before it knows the
// queue: some rule grants the level, and a deny grants nothing.
func TestAllowAnyQueue(t *testing.T) {
	parse := func(src string) *Rules {
		r, err := ParseRules("p.hcl", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	alice := Compile(parse(`queue "root.a" { policy = "submit" }`))
	if !alice.AllowAnyQueue(LevelRead) || !alice.AllowAnyQueue(LevelSubmit) || alice.AllowAnyQueue(LevelAdmin) {
		t.Error("submit on root.a grants read and submit on some queue, not admin")
	}
	denied := Compile(parse(`queue "*" { policy = "deny" }`), parse(`node { policy = "write" }`))
	if denied.AllowAnyQueue(LevelRead) {
		t.Error("a deny rule grants no queue")
	}
	for _, a := range []*ACL{DenyAll, Compile()} {
		if a.AllowAnyQueue(LevelRead) {
			t.Error("an empty ACL grants no queue")
		}
	}
	if !Management.AllowAnyQueue(LevelAdmin) {
		t.Error("management grants every queue")
	}
}

func TestTokenSecretsAndIDs(t *testing.T) {
	secret := NewID()
	if err := ValidateID("secret_id", secret); err != nil {
		t.Fatal(err)
	}
	if NewID() == secret {
		t.Fatal("IDs must be random")
	}
	tok := &Token{SecretHash: HashSecret(secret)}
	if !tok.SecretMatches(secret) || tok.SecretMatches(NewID()) || tok.SecretMatches("") {
		t.Fatal("secret matching")
	}
	for _, bad := range []string{"", "x", strings.ToUpper(secret), secret[:35] + "g", strings.Replace(secret, "-", "x", 1)} {
		if ValidateID("secret_id", bad) == nil {
			t.Errorf("ValidateID(%q) accepted", bad)
		}
	}
	if (&Token{ExpiresAt: 10}).Expired(9) || !(&Token{ExpiresAt: 10}).Expired(10) || (&Token{}).Expired(1<<62) {
		t.Error("expiry")
	}
	for _, bad := range []string{"", "a b", "a/b", strings.Repeat("a", 65), "ü"} {
		if ValidateName("name", bad) == nil {
			t.Errorf("ValidateName(%q) accepted", bad)
		}
	}
	if ValidateName("name", "alice@corp.example") != nil {
		t.Error("ValidateName refused a plain user name")
	}
}

func FuzzParseRules(f *testing.F) {
	f.Add([]byte("queue \"root.prod.*\" { policy = \"read\" }\nnode { policy = \"write\" }\nacl = \"write\"\n"))
	f.Add([]byte("operator { policy = \"deny\" }\n"))
	f.Add([]byte("{\"queue\": 1}"))
	f.Fuzz(func(t *testing.T, src []byte) {
		r, err := ParseRules("f.hcl", src)
		if err != nil {
			if r != nil {
				t.Fatal("rules with an error")
			}
			return
		}
		a := Compile(r)
		for _, q := range r.Queues {
			if ValidatePattern(q.Pattern) != nil || q.Level == LevelNone || q.Level == LevelWrite {
				t.Fatalf("parsed an invalid rule %+v", q)
			}
			a.QueueLevel(strings.TrimSuffix(q.Pattern, "*") + "x")
		}
	})
}

// AnyQueue says whether a token may reach a queue method at all: what the
// servers refuse before they look anything up or wait.
func TestAnyQueue(t *testing.T) {
	reader := Compile(mustParse(t, `queue "root.a" { policy = "read" }`))
	submitter := Compile(mustParse(t, `queue "root.b.*" { policy = "submit" }`))
	denied := Compile(mustParse(t, `queue "*" { policy = "deny" }`), mustParse(t, `node { policy = "write" }`))
	for _, tt := range []struct {
		name       string
		acl        *ACL
		read, subm bool
	}{
		{"read on one queue", reader, true, false},
		{"submit on a subtree", submitter, true, true},
		{"deny everywhere, node write", denied, false, false},
		{"the anonymous caller's", DenyAll, false, false},
		{"management", Management, true, true},
	} {
		if got := tt.acl.AllowAnyQueue(LevelRead); got != tt.read {
			t.Errorf("%s: AnyQueue(read) = %v", tt.name, got)
		}
		if got := tt.acl.AllowAnyQueue(LevelSubmit); got != tt.subm {
			t.Errorf("%s: AnyQueue(submit) = %v", tt.name, got)
		}
	}
}
