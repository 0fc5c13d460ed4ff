package scheduler

import (
	"strings"
	"testing"
)

func TestValidateID(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"app-12", true},
		{"c-5-0", true},
		{"o-n1-3-17", true},
		{"node_1.rack-a", true},
		{"...", true}, // odd, but a plain name: it leaves no directory
		{strings.Repeat("a", MaxIDLength), true},
		{"", false},
		{".", false},
		{"..", false},
		{"../../x", false},
		{"a/b", false},
		{"/etc", false},
		{`a\b`, false},
		{"*", false},
		{"c-?", false},
		{"[ab]", false},
		{"a b", false},
		{"a\x00b", false},
		{"é", false},
		{strings.Repeat("a", MaxIDLength+1), false},
	} {
		err := ValidateID("container.id", tc.id)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateID(%q) = %v, want ok=%v", tc.id, err, tc.ok)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "container.id ") {
			t.Errorf("ValidateID(%q) error %q does not name the field first", tc.id, err)
		}
	}
}

func TestValidateNodeIDRefusesDotNames(t *testing.T) {
	for _, id := range []string{".", "..", "a/b", ""} {
		if ValidateNodeID(id) == nil {
			t.Errorf("ValidateNodeID(%q) accepted it", id)
		}
	}
	if err := ValidateNodeID("n1.example"); err != nil {
		t.Errorf("ValidateNodeID(n1.example) = %v", err)
	}
}
