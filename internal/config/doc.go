// Package config reads weft's configuration: the typed settings of each
// process (Server, Agent), given once as a struct field that carries both
// its HCL name and its flag, merged from a -config file and the command
// line (flags win, then the file, then the default); and the files of the
// client commands — queue configurations for `weft queue apply` and app
// specs for `weft app submit -spec` — as HCL or JSON. Every error names
// the file, line and field. The same files sent to the HTTP API are read
// with bounds (ParseQueueConfigBody, ParseAppSpecBody): a body is scanned
// without allocating before it is parsed, and what parsing it may cost is
// bounded and stated (QueueConfigBodyCost, AppSpecBodyCost).
//
// It must never talk to a server or touch state: it turns bytes and flags
// into validated values, nothing more.
package config
