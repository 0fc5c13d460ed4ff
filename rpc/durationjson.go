package rpc

import (
	"encoding/json"
	"fmt"
	"time"
)

// UnmarshalJSON reads a duration as MarshalJSON writes it ("5s"), so
// clients of the HTTP API can decode what it answers.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: give a string such as \"5s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	*d = Duration(v)
	return nil
}
