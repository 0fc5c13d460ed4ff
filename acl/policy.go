package acl

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// Level is what a rule grants. For queues the levels are ordered
// read < submit < admin; for node, operator and acl rules read < write.
// Deny is not a level in that order: a deny rule wins over any grant that
// matches as specifically (SPEC §15).
type Level uint8

// Levels, weakest first.
const (
	LevelNone Level = iota
	LevelRead
	LevelSubmit // queues only: submit apps, kill one's own
	LevelWrite  // node, operator and acl rules
	LevelAdmin  // queues only: kill any app in the subtree
	LevelDeny
)

// String names the level as policies write it.
func (l Level) String() string {
	return [...]string{"none", "read", "submit", "write", "admin", "deny"}[min(int(l), int(LevelDeny))]
}

// MaxPolicySize bounds the HCL text of one policy.
const MaxPolicySize = 64 << 10

// MaxQueueRules bounds the queue rules of one policy.
const MaxQueueRules = 1000

// Rules is a parsed policy.
type Rules struct {
	// Queues are the queue rules in the order written.
	Queues []QueueRule
	// Node, Operator and ACL are LevelNone when the policy says nothing.
	Node     Level
	Operator Level
	ACL      Level
}

// QueueRule grants a level on the queues a pattern matches: an exact queue
// path ("root.dev"), or a prefix ending in "*" ("root.prod.*" matches every
// queue below root.prod; "*" matches every queue).
type QueueRule struct {
	Pattern string
	Level   Level
}

// Matches reports whether the rule's pattern matches the queue path.
func (r QueueRule) Matches(path string) bool {
	if p, glob := strings.CutSuffix(r.Pattern, "*"); glob {
		return strings.HasPrefix(path, p)
	}
	return r.Pattern == path
}

var policySchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "acl"}},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "queue", LabelNames: []string{"pattern"}},
		{Type: "node"},
		{Type: "operator"},
	},
}

var ruleSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "policy", Required: true}}}

// ParseRules parses a policy's HCL. Errors name the file and line of every
// problem, e.g. `dev.hcl:3,12: queue "root.dev": policy "writ" is not one
// of read, submit, admin, deny`.
func ParseRules(filename string, src []byte) (*Rules, error) {
	if len(src) > MaxPolicySize {
		return nil, fmt.Errorf("%s: policy is %d bytes; at most %d", filename, len(src), MaxPolicySize)
	}
	f, diags := hclsyntax.ParseConfig(src, filename, hcl.Pos{Line: 1, Column: 1})
	if diags.HasErrors() {
		return nil, diagError(diags)
	}
	content, diags := f.Body.Content(policySchema)
	if diags.HasErrors() {
		return nil, diagError(diags)
	}
	r := &Rules{}
	var problems hcl.Diagnostics
	if a, ok := content.Attributes["acl"]; ok {
		r.ACL, diags = level(a, "acl", LevelRead, LevelWrite, LevelDeny)
		problems = append(problems, diags...)
	}
	seen := map[string]hcl.Range{}
	once := map[string]bool{}
	for _, b := range content.Blocks {
		what := b.Type
		if b.Type == "queue" {
			what = fmt.Sprintf("queue %q", b.Labels[0])
		}
		rc, diags := b.Body.Content(ruleSchema)
		if diags.HasErrors() {
			problems = append(problems, diags...)
			continue
		}
		switch b.Type {
		case "queue":
			pattern := b.Labels[0]
			if err := ValidatePattern(pattern); err != nil {
				problems = append(problems, errAt(b.LabelRanges[0], "%s: %v", what, err))
				continue
			}
			if prev, dup := seen[pattern]; dup {
				problems = append(problems, errAt(b.DefRange, "%s is given twice (first at line %d)", what, prev.Start.Line))
				continue
			}
			seen[pattern] = b.DefRange
			l, diags := level(rc.Attributes["policy"], what, LevelRead, LevelSubmit, LevelAdmin, LevelDeny)
			problems = append(problems, diags...)
			r.Queues = append(r.Queues, QueueRule{Pattern: pattern, Level: l})
		case "node", "operator":
			if once[b.Type] {
				problems = append(problems, errAt(b.DefRange, "%s is given twice", b.Type))
				continue
			}
			once[b.Type] = true
			l, diags := level(rc.Attributes["policy"], what, LevelRead, LevelWrite, LevelDeny)
			problems = append(problems, diags...)
			if b.Type == "node" {
				r.Node = l
			} else {
				r.Operator = l
			}
		}
	}
	if len(r.Queues) > MaxQueueRules {
		return nil, fmt.Errorf("%s: %d queue rules; at most %d", filename, len(r.Queues), MaxQueueRules)
	}
	if problems.HasErrors() {
		return nil, diagError(problems)
	}
	return r, nil
}

// ValidatePattern checks a queue pattern: dot-separated queue names (as in
// queue paths), optionally ending in "*".
func ValidatePattern(p string) error {
	if p == "" || len(p) > 256 {
		return fmt.Errorf("pattern must be 1 to 256 characters")
	}
	body, _ := strings.CutSuffix(p, "*")
	if strings.Contains(body, "*") {
		return fmt.Errorf("pattern %q: '*' may only end a pattern", p)
	}
	for _, c := range body {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("pattern %q: use queue names (letters, digits, '_', '-') separated by '.', optionally ending in '*'", p)
		}
	}
	return nil
}

func level(a *hcl.Attribute, what string, allowed ...Level) (Level, hcl.Diagnostics) {
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() {
		return LevelNone, diags
	}
	names := make([]string, len(allowed))
	for i, l := range allowed {
		names[i] = l.String()
	}
	if v.IsNull() || !v.IsWhollyKnown() || v.Type() != cty.String {
		return LevelNone, hcl.Diagnostics{errAt(a.Expr.Range(), "%s: policy must be one of %s", what, strings.Join(names, ", "))}
	}
	s := v.AsString()
	for _, l := range allowed {
		if l.String() == s {
			return l, nil
		}
	}
	return LevelNone, hcl.Diagnostics{errAt(a.Expr.Range(), "%s: policy %q is not one of %s", what, s, strings.Join(names, ", "))}
}

func errAt(r hcl.Range, format string, a ...any) *hcl.Diagnostic {
	rr := r
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: fmt.Sprintf(format, a...), Subject: &rr}
}

func diagError(diags hcl.Diagnostics) error {
	var parts []string
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		msg := d.Summary
		if d.Detail != "" {
			msg += ": " + strings.TrimSuffix(d.Detail, ".")
		}
		if d.Subject != nil {
			msg = fmt.Sprintf("%s:%d,%d: %s", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column, msg)
		}
		parts = append(parts, msg)
	}
	return fmt.Errorf("%s", strings.Join(parts, "; "))
}
