package config

import (
	"flag"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/weft-sched/weft/scheduler"
)

// RegisterFlags registers a flag for every field of cfg (a pointer to a
// process configuration such as *Server) that has a `flag` tag, writing
// into that field, with the field's current value as the default.
func RegisterFlags(fs *flag.FlagSet, cfg any) {
	v := reflect.ValueOf(cfg).Elem()
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, help := f.Tag.Get("flag"), f.Tag.Get("help")
		if name == "" {
			continue
		}
		switch p := v.Field(i).Addr().Interface().(type) {
		case *string:
			fs.StringVar(p, name, *p, help)
		case *int:
			fs.IntVar(p, name, *p, help)
		case *uint64:
			fs.Uint64Var(p, name, *p, help)
		case *bool:
			fs.BoolVar(p, name, *p, help)
		case *[]string:
			fs.Var((*listFlag)(p), name, help)
		case *map[string]int64:
			fs.Var((*resourcesFlag)(p), name, help)
		default:
			panic(fmt.Sprintf("config: field %s has a flag but no flag type", f.Name))
		}
	}
}

// listFlag is a repeatable string flag; the first use replaces the default.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// resourcesFlag reads "memory_mb=8192,vcores=8,gpu=2"; it replaces the
// default whole.
type resourcesFlag map[string]int64

func (r *resourcesFlag) String() string { return formatResources(*r) }
func (r *resourcesFlag) Set(s string) error {
	m := map[string]int64{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, val, ok := strings.Cut(part, "=")
		if !ok {
			return fmt.Errorf("%q: want name=value", part)
		}
		name = strings.TrimSpace(name)
		if _, dup := m[name]; dup {
			return fmt.Errorf("%s given twice", name)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
		if err != nil {
			return fmt.Errorf("%s: %q is not a whole number", name, val)
		}
		m[name] = n
	}
	if len(m) == 0 {
		return fmt.Errorf("no resources given")
	}
	*r = m
	return nil
}

// MergeFile lays a -config file under the command line: every setting the
// file names is taken from it unless its flag was given (set holds the
// names of the flags given). cfg is a pointer to a process configuration;
// the file must name only its settings. Errors carry file:line.
func MergeFile(cfg any, filename string, src []byte, set map[string]bool) error {
	f, diags := parseFile(filename, src)
	if diags.HasErrors() {
		return diagError(diags)
	}
	file := reflect.New(reflect.TypeOf(cfg).Elem())
	if diags := gohcl.DecodeBody(f.Body, nil, file.Interface()); diags.HasErrors() {
		return diagError(diags)
	}
	schema, _ := gohcl.ImpliedBodySchema(file.Interface())
	content, _ := f.Body.Content(schema)
	dst, src2 := reflect.ValueOf(cfg).Elem(), file.Elem()
	t := dst.Type()
	for i := 0; i < t.NumField(); i++ {
		field := t.Field(i)
		hclName, kind, _ := strings.Cut(field.Tag.Get("hcl"), ",")
		if kind == "block" {
			// Blocks have no flags: the file's block, when it has one, is it.
			if len(content.Blocks.OfType(hclName)) > 0 {
				dst.Field(i).Set(src2.Field(i))
			}
			continue
		}
		if _, inFile := content.Attributes[hclName]; !inFile || set[field.Tag.Get("flag")] {
			continue
		}
		dst.Field(i).Set(src2.Field(i))
	}
	return nil
}

// NodeCapacity is the agent's resources as a vector (after Validate).
func (c *Agent) NodeCapacity() scheduler.Resources {
	r, _ := NodeResources(c.Resources)
	return r
}
