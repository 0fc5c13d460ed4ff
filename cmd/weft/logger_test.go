package main

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestLogJSONWritesOneObjectALine(t *testing.T) {
	var buf bytes.Buffer
	old := stderr
	stderr = &buf
	defer func() { stderr = old }()
	logger, err := newLogger("info", true)
	if err != nil {
		t.Fatal(err)
	}
	logger.Named("agent").Info("agent started", "node_id", "a1")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("-log-json wrote %q: %v", buf.String(), err)
	}
	if line["@message"] != "agent started" || line["node_id"] != "a1" || line["@module"] != "weft.agent" || line["@level"] != "info" {
		t.Errorf("log line %v", line)
	}
}
