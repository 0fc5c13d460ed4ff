// Package hclconf reads weft's configuration files (HCL, or JSON in HCL's
// JSON syntax) into typed values: queue configurations for `weft queue
// apply` and server/agent config files for `-config`. Every error names the
// file, line and field. It must never talk to a server or touch state: it
// turns bytes into values and validates them, nothing more.
package hclconf
