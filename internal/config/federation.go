package config

import (
	"math/big"

	"github.com/hashicorp/hcl/v2"
	"github.com/weft-sched/weft/scheduler/federation"
	"github.com/zclconf/go-cty/cty"
)

// A federation policy file (`weft federation policy apply FILE`, SPEC
// §18): a default block and queue blocks, each with the router policy,
// optionally the AMRMProxy policy and weights by sub-cluster ID. A queue
// without weights takes the global policy generator's.
//
//	default { router = "load" }
//	queue "root.prod" {
//	  router  = "weighted"
//	  weights = { sc1 = 2, sc2 = 1 }
//	}
var (
	policyFileSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
		{Type: "default"},
		{Type: "queue", LabelNames: []string{"name"}},
	}}
	policySchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "router", Required: true}, {Name: "amrmproxy"}, {Name: "weights"},
	}}
)

// ParsePolicies reads a federation policy file. It returns the policies
// only if the file parses and every policy validates; otherwise an *Error
// listing every problem as file:line,col: reason.
func ParsePolicies(filename string, src []byte) ([]federation.Policy, error) {
	f, diags := parseFile(filename, src)
	if diags.HasErrors() {
		return nil, diagError(diags)
	}
	content, diags := f.Body.Content(policyFileSchema)
	if diags.HasErrors() {
		return nil, diagError(diags)
	}
	var out []federation.Policy
	seen := map[string]hcl.Range{}
	for _, b := range content.Blocks {
		p := federation.Policy{}
		if b.Type == "queue" {
			p.Queue = b.Labels[0]
		}
		if first, dup := seen[p.Queue]; dup {
			diags = append(diags, errAt(b.DefRange, "Duplicate policy", "this queue has a policy at line %d already", first.Start.Line))
			continue
		}
		seen[p.Queue] = b.DefRange
		body, d := b.Body.Content(policySchema)
		if diags = append(diags, d...); d.HasErrors() {
			continue
		}
		for name, attr := range body.Attributes {
			v, d := value(attr)
			if diags = append(diags, d...); d.HasErrors() {
				continue
			}
			switch name {
			case "router", "amrmproxy":
				if v.Type() != cty.String || v.IsNull() {
					diags = append(diags, errAt(attr.Range, "Invalid "+name, "give a policy name in quotes"))
					continue
				}
				if name == "router" {
					p.Router = federation.PolicyType(v.AsString())
				} else {
					p.AMRMProxy = federation.AMRMPolicyType(v.AsString())
				}
			case "weights":
				if !v.Type().IsObjectType() && !v.Type().IsMapType() {
					diags = append(diags, errAt(attr.Range, "Invalid weights", "give { SUBCLUSTER = WEIGHT, ... }"))
					continue
				}
				p.Weights = map[string]uint32{}
				for it := v.ElementIterator(); it.Next(); {
					k, w := it.Element()
					if w.Type() != cty.Number || w.IsNull() {
						diags = append(diags, errAt(attr.Range, "Invalid weight", "%s: give a whole number from 0 to %d", k.AsString(), federation.MaxWeight))
						continue
					}
					n, acc := w.AsBigFloat().Int64()
					if acc != big.Exact || n < 0 || n > federation.MaxWeight {
						diags = append(diags, errAt(attr.Range, "Invalid weight", "%s: give a whole number from 0 to %d", k.AsString(), federation.MaxWeight))
						continue
					}
					p.Weights[k.AsString()] = uint32(n)
				}
			}
		}
		if err := p.Validate(); err != nil && !diags.HasErrors() {
			diags = append(diags, errAt(b.DefRange, "Invalid policy", "%v", err))
			continue
		}
		out = append(out, p)
	}
	if diags.HasErrors() {
		return nil, diagError(diags)
	}
	return out, nil
}
