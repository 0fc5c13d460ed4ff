package hclconf

import (
	"github.com/hashicorp/hcl/v2/gohcl"
)

// ServerFile is a `weft server -config` file. Flags given on the command
// line override it.
type ServerFile struct {
	NodeID          string   `hcl:"node_id,optional"`
	DataDir         string   `hcl:"data_dir,optional"`
	Bind            string   `hcl:"bind,optional"`
	RPCPort         int      `hcl:"rpc_port,optional"`
	SerfPort        int      `hcl:"serf_port,optional"`
	HTTPPort        int      `hcl:"http_port,optional"`
	BootstrapExpect int      `hcl:"bootstrap_expect,optional"`
	Join            []string `hcl:"join,optional"`
	LogLevel        string   `hcl:"log_level,optional"`
}

// ParseServerFile reads a server config file.
func ParseServerFile(filename string, src []byte) (*ServerFile, error) {
	f, diags := parseFile(filename, src)
	if diags.HasErrors() {
		return nil, diagError(diags)
	}
	var out ServerFile
	if diags := gohcl.DecodeBody(f.Body, nil, &out); diags.HasErrors() {
		return nil, diagError(diags)
	}
	return &out, nil
}
