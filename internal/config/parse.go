package config

import (
	"bytes"
	"fmt"
	"math/big"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	hcljson "github.com/hashicorp/hcl/v2/json"
	"github.com/zclconf/go-cty/cty"
)

// Error is every problem found in one file, each as "file:line,col: reason".
type Error struct {
	Problems []string
}

func (e *Error) Error() string { return strings.Join(e.Problems, "; ") }

// maxProblems bounds the problems an Error lists: a file with thousands
// of mistakes is answered with the first ones and a count.
const maxProblems = 20

func diagError(diags hcl.Diagnostics) error {
	e := &Error{}
	more := 0
	for _, d := range diags {
		if d.Severity != hcl.DiagError {
			continue
		}
		if len(e.Problems) == maxProblems {
			more++
			continue
		}
		msg := d.Summary
		if d.Detail != "" {
			msg += ": " + strings.TrimSuffix(d.Detail, ".")
		}
		if d.Subject != nil {
			msg = fmt.Sprintf("%s:%d,%d: %s", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column, msg)
		}
		e.Problems = append(e.Problems, msg)
	}
	if more > 0 {
		e.Problems = append(e.Problems, fmt.Sprintf("and %d more problems", more))
	}
	if len(e.Problems) == 0 {
		return nil
	}
	return e
}

// isJSON reports whether a file is JSON: its name ends in .json or its
// content starts with '{'.
func isJSON(filename string, src []byte) bool {
	return strings.EqualFold(filepath.Ext(filename), ".json") || bytes.HasPrefix(bytes.TrimSpace(src), []byte("{"))
}

// parseFile parses HCL, or JSON (HCL's JSON syntax) when isJSON.
func parseFile(filename string, src []byte) (*hcl.File, hcl.Diagnostics) {
	if isJSON(filename, src) {
		return hcljson.Parse(src, filename)
	}
	return hclsyntax.ParseConfig(src, filename, hcl.Pos{Line: 1, Column: 1})
}

func errAt(r hcl.Range, summary, format string, a ...any) *hcl.Diagnostic {
	rr := r
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: fmt.Sprintf(format, a...), Subject: &rr}
}

// value evaluates an attribute that may not refer to variables or functions.
func value(attr *hcl.Attribute) (cty.Value, hcl.Diagnostics) {
	v, diags := attr.Expr.Value(nil)
	if diags.HasErrors() {
		return cty.NilVal, diags
	}
	if v.IsNull() {
		return cty.NilVal, hcl.Diagnostics{errAt(attr.Range, "Invalid value", "%s must not be null", attr.Name)}
	}
	if !v.IsWhollyKnown() {
		return cty.NilVal, hcl.Diagnostics{errAt(attr.Range, "Invalid value", "%s must be a literal", attr.Name)}
	}
	return v, nil
}

func asString(attr *hcl.Attribute) (string, hcl.Diagnostics) {
	v, diags := value(attr)
	if diags.HasErrors() {
		return "", diags
	}
	if v.Type() != cty.String {
		return "", hcl.Diagnostics{errAt(attr.Range, "Invalid value", "%s must be a string", attr.Name)}
	}
	return v.AsString(), nil
}

func asBool(attr *hcl.Attribute) (bool, hcl.Diagnostics) {
	v, diags := value(attr)
	if diags.HasErrors() {
		return false, diags
	}
	if v.Type() != cty.Bool {
		return false, hcl.Diagnostics{errAt(attr.Range, "Invalid value", "%s must be true or false", attr.Name)}
	}
	return v.True(), nil
}

func asFloat(attr *hcl.Attribute) (float64, hcl.Diagnostics) {
	v, diags := value(attr)
	if diags.HasErrors() {
		return 0, diags
	}
	if v.Type() != cty.Number {
		return 0, hcl.Diagnostics{errAt(attr.Range, "Invalid value", "%s must be a number", attr.Name)}
	}
	f, _ := v.AsBigFloat().Float64()
	return f, nil
}

func numberToInt(v cty.Value, name string, r hcl.Range) (int64, hcl.Diagnostics) {
	if v.Type() != cty.Number {
		return 0, hcl.Diagnostics{errAt(r, "Invalid value", "%s must be a whole number", name)}
	}
	bf := v.AsBigFloat()
	i, acc := bf.Int64()
	if acc != big.Exact || !bf.IsInt() {
		return 0, hcl.Diagnostics{errAt(r, "Invalid value", "%s must be a whole number that fits in 64 bits", name)}
	}
	return i, nil
}

func asInt(attr *hcl.Attribute) (int64, hcl.Diagnostics) {
	v, diags := value(attr)
	if diags.HasErrors() {
		return 0, diags
	}
	return numberToInt(v, attr.Name, attr.Range)
}

// asDuration reads a Go duration string ("15s", "2m"); offWord, if not
// empty, is accepted as zero.
func asDuration(attr *hcl.Attribute, offWord string) (time.Duration, hcl.Diagnostics) {
	s, diags := asString(attr)
	if diags.HasErrors() {
		return 0, diags
	}
	if offWord != "" && s == offWord {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		hint := ""
		if offWord != "" {
			hint = fmt.Sprintf(" or %q", offWord)
		}
		return 0, hcl.Diagnostics{errAt(attr.Range, "Invalid duration", "%s: %q is not a duration like \"15s\"%s", attr.Name, s, hint)}
	}
	return d, nil
}
