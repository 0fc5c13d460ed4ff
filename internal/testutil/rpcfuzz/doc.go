// Package rpcfuzz keeps the fuzz targets complete: it lets the server and
// agent tests check that every RPC method they register takes a request
// type rpc's fuzz targets decode (rpc/testdata/request_types.txt), and its
// own test checks that make fuzz runs every fuzz target of the repository.
// It is apart from testutil because it imports rpc, whose own tests use
// testutil.
//
// It is imported only by _test.go files; production code must never import
// it.
package rpcfuzz
