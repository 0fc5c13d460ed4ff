package scheduler

import (
	"fmt"
	"strings"
	"testing"
)

func TestValidateCounters(t *testing.T) {
	many := Counters{}
	for i := 0; i <= MaxCounters; i++ {
		many[fmt.Sprintf("c%d", i)] = int64(i)
	}
	for _, tc := range []struct {
		name string
		c    Counters
		want string // "" for valid
	}{
		{"none", nil, ""},
		{"good", Counters{"maps.data_local": 3, "shuffle.bytes.off_rack": -1, "reduce_0-wtnd": 1 << 62}, ""},
		{"empty name", Counters{"": 1}, `counters: name "" must be 1 to 64 characters`},
		{"long name", Counters{strings.Repeat("a", MaxCounterNameLength+1): 1}, "must be 1 to 64 characters"},
		{"upper case", Counters{"Maps": 1}, `counters: name "Maps" may hold only a-z`},
		{"space", Counters{"maps local": 1}, `"maps local" may hold only`},
		{"too many", many, "counters: 1025; at most 1024"},
	} {
		err := ValidateCounters(tc.c)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// Every server refusing the same counters must say the same, whatever
// order it ranges over the map in: the refusal is replicated.
func TestValidateCountersNamesTheFirstBadNameInNameOrder(t *testing.T) {
	c := Counters{"ok": 1}
	for _, n := range []string{"Zed", "b c", "A", "x!", "Q"} {
		c[n] = 1
	}
	for range 50 {
		if err := ValidateCounters(c); err == nil || !strings.Contains(err.Error(), `name "A" `) {
			t.Fatalf("%v: want the first bad name in order, \"A\"", err)
		}
	}
}
