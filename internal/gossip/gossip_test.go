package gossip

import (
	"reflect"
	"testing"
)

func TestJoinAddrs(t *testing.T) {
	got := JoinAddrs([]string{"10.0.0.1", "10.0.0.2:9000", "[::1]"})
	want := []string{"10.0.0.1:8031", "10.0.0.1:8041", "10.0.0.2:9000", "[::1]:8031", "[::1]:8041"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("JoinAddrs = %v, want %v", got, want)
	}
}
