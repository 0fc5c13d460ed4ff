package federation_test

import (
	"strings"
	"testing"

	"github.com/weft-sched/weft/router/fedstate"
	"github.com/weft-sched/weft/scheduler/federation"
)

// The routers mint the IDs the servers check: one prefix for both.
func TestAppIDPrefixIsTheRoutersOne(t *testing.T) {
	if federation.AppIDPrefix != fedstate.AppIDPrefix {
		t.Fatalf("federation.AppIDPrefix %q, router/fedstate.AppIDPrefix %q", federation.AppIDPrefix, fedstate.AppIDPrefix)
	}
}

func TestValidateAppID(t *testing.T) {
	for _, tc := range []struct {
		id string
		ok bool
	}{
		{"app-f1", true},
		{"app-f18446744073709551615", true},
		{"app-f", false},
		{"app-f0", false},
		{"app-f01", false},
		{"app-1", false},
		{"app-f1x", false},
		{"app-f-1", false},
		{"sc1.app-f1", false},
		{"app-f" + strings.Repeat("9", 21), false},
		{"", false},
	} {
		err := federation.ValidateAppID("app_id", tc.id)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateAppID(%q) = %v, want ok=%v", tc.id, err, tc.ok)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "app_id ") {
			t.Errorf("ValidateAppID(%q) error %q does not name the field first", tc.id, err)
		}
	}
}
