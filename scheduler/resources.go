package scheduler

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Resource names that every vector carries. Any other name is an extended
// resource (for example "gpu") declared by the agents that have it.
const (
	ResourceMemoryMB = "memory_mb"
	ResourceVcores   = "vcores"
)

// Resources is an integer resource vector: memory in MiB, virtual cores and
// any number of named extended resources. The zero value is the empty vector.
// A missing extended resource counts as zero. Resources values are treated as
// immutable once shared: arithmetic returns new values.
type Resources struct {
	MemoryMB int64            `codec:"memory_mb"`
	Vcores   int64            `codec:"vcores"`
	Extended map[string]int64 `codec:"extended,omitempty"`
}

// Get returns the amount of the named resource.
func (r Resources) Get(name string) int64 {
	switch name {
	case ResourceMemoryMB:
		return r.MemoryMB
	case ResourceVcores:
		return r.Vcores
	default:
		return r.Extended[name]
	}
}

// With returns a copy of r with the named resource set to v.
func (r Resources) With(name string, v int64) Resources {
	switch name {
	case ResourceMemoryMB:
		r.MemoryMB = v
	case ResourceVcores:
		r.Vcores = v
	default:
		ext := make(map[string]int64, len(r.Extended)+1)
		for k, x := range r.Extended {
			ext[k] = x
		}
		if v == 0 {
			delete(ext, name)
		} else {
			ext[name] = v
		}
		if len(ext) == 0 {
			ext = nil
		}
		r.Extended = ext
	}
	return r
}

// Names returns the resource names present in r, memory and vcores first and
// extended resources in sorted order.
func (r Resources) Names() []string {
	names := []string{ResourceMemoryMB, ResourceVcores}
	ext := make([]string, 0, len(r.Extended))
	for k := range r.Extended {
		ext = append(ext, k)
	}
	sort.Strings(ext)
	return append(names, ext...)
}

// IsZero reports whether every component of r is zero.
func (r Resources) IsZero() bool {
	if r.MemoryMB != 0 || r.Vcores != 0 {
		return false
	}
	for _, v := range r.Extended {
		if v != 0 {
			return false
		}
	}
	return true
}

// Add returns r + o.
func (r Resources) Add(o Resources) Resources {
	out := Resources{MemoryMB: r.MemoryMB + o.MemoryMB, Vcores: r.Vcores + o.Vcores}
	out.Extended = mergeExtended(r.Extended, o.Extended, 1)
	return out
}

// Sub returns r - o. Components may become negative.
func (r Resources) Sub(o Resources) Resources {
	out := Resources{MemoryMB: r.MemoryMB - o.MemoryMB, Vcores: r.Vcores - o.Vcores}
	out.Extended = mergeExtended(r.Extended, o.Extended, -1)
	return out
}

func mergeExtended(a, b map[string]int64, sign int64) map[string]int64 {
	if len(a) == 0 && len(b) == 0 {
		return nil
	}
	out := make(map[string]int64, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] += sign * v
	}
	for k, v := range out {
		if v == 0 {
			delete(out, k)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Fits reports whether every component of r is at most the same component
// of capacity.
func (r Resources) Fits(capacity Resources) bool {
	if r.MemoryMB > capacity.MemoryMB || r.Vcores > capacity.Vcores {
		return false
	}
	for k, v := range r.Extended {
		if v > capacity.Extended[k] {
			return false
		}
	}
	return true
}

// Validate reports the first negative component of r, naming it.
func (r Resources) Validate() error {
	for _, name := range r.Names() {
		if v := r.Get(name); v < 0 {
			return fmt.Errorf("%s must not be negative (got %d)", name, v)
		}
	}
	for k := range r.Extended {
		if err := ValidateResourceName(k); err != nil {
			return err
		}
	}
	return nil
}

// ValidateResourceName checks an extended resource name: lower-case letters,
// digits, '_', '-', '.' and '/', starting with a letter, at most 63 bytes.
func ValidateResourceName(name string) error {
	if name == "" || len(name) > 63 {
		return fmt.Errorf("resource name %q must be 1 to 63 characters", name)
	}
	for i, c := range name {
		ok := c >= 'a' && c <= 'z' || i > 0 && (c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '/')
		if !ok {
			return fmt.Errorf("resource name %q: use lower-case letters, digits, '_', '-', '.', '/' and start with a letter", name)
		}
	}
	return nil
}

// String formats r as "memory_mb=1024,vcores=2,gpu=1", the same form
// ParseResources reads.
func (r Resources) String() string {
	var b strings.Builder
	for i, name := range r.Names() {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(name)
		b.WriteByte('=')
		if v := r.Get(name); v == Unlimited {
			b.WriteString("unlimited")
		} else {
			b.WriteString(strconv.FormatInt(v, 10))
		}
	}
	return b.String()
}

// ParseResources reads "memory_mb=8192,vcores=8,gpu=2". Every name may
// appear once; values are non-negative integers.
func ParseResources(s string) (Resources, error) {
	var r Resources
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, val, ok := strings.Cut(part, "=")
		name = strings.TrimSpace(name)
		if !ok {
			return Resources{}, fmt.Errorf("resource %q: want name=value", part)
		}
		if seen[name] {
			return Resources{}, fmt.Errorf("resource %q given twice", name)
		}
		seen[name] = true
		if name != ResourceMemoryMB && name != ResourceVcores {
			if err := ValidateResourceName(name); err != nil {
				return Resources{}, err
			}
		}
		v, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
		if err != nil || v < 0 {
			return Resources{}, fmt.Errorf("resource %s: %q is not a non-negative integer", name, val)
		}
		r = r.With(name, v)
	}
	return r, nil
}

// MarshalJSON writes the flat SPEC §14 shape: {"memory_mb", "vcores", ...extended}.
func (r Resources) MarshalJSON() ([]byte, error) {
	m := make(map[string]int64, 2+len(r.Extended))
	for k, v := range r.Extended {
		m[k] = v
	}
	m[ResourceMemoryMB] = r.MemoryMB
	m[ResourceVcores] = r.Vcores
	return json.Marshal(m)
}

// UnmarshalJSON reads the flat shape written by MarshalJSON.
func (r *Resources) UnmarshalJSON(b []byte) error {
	var m map[string]int64
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*r = Resources{}
	for k, v := range m {
		*r = r.With(k, v)
	}
	return nil
}

// Scale returns r multiplied by n.
func (r Resources) Scale(n int64) Resources {
	out := Resources{MemoryMB: r.MemoryMB * n, Vcores: r.Vcores * n}
	if len(r.Extended) > 0 && n != 0 {
		out.Extended = make(map[string]int64, len(r.Extended))
		for k, v := range r.Extended {
			out.Extended[k] = v * n
		}
	}
	return out
}

// Unlimited marks a component of a limit that does not constrain.
const Unlimited = math.MaxInt64

// WithinLimit reports whether r stays within limit, where a component of
// limit equal to Unlimited, or an extended resource limit does not name,
// does not constrain.
func (r Resources) WithinLimit(limit Resources) bool {
	if limit.MemoryMB != Unlimited && r.MemoryMB > limit.MemoryMB || limit.Vcores != Unlimited && r.Vcores > limit.Vcores {
		return false
	}
	for k, v := range r.Extended {
		if l, ok := limit.Extended[k]; ok && l != Unlimited && v > l {
			return false
		}
	}
	return true
}

// CapBy returns r with each component lowered to limit's where limit
// constrains it (see WithinLimit).
func (r Resources) CapBy(limit Resources) Resources {
	out := r
	if limit.MemoryMB < out.MemoryMB {
		out.MemoryMB = limit.MemoryMB
	}
	if limit.Vcores < out.Vcores {
		out.Vcores = limit.Vcores
	}
	for k, v := range r.Extended {
		if l, ok := limit.Extended[k]; ok && l < v {
			out = out.With(k, l)
		}
	}
	return out
}

// ScaleFloat returns r multiplied by f, rounded down per component.
func (r Resources) ScaleFloat(f float64) Resources {
	out := Resources{MemoryMB: int64(float64(r.MemoryMB) * f), Vcores: int64(float64(r.Vcores) * f)}
	for k, v := range r.Extended {
		out = out.With(k, int64(float64(v)*f))
	}
	return out
}
