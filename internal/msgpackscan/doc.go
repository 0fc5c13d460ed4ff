// Package msgpackscan finds where one msgpack value ends in a byte stream
// without decoding it: it reads type bytes and length fields only, skips
// payloads, keeps no stack (a count of values still to read stands in for
// nesting) and allocates nothing. Readers use it to take a whole message off
// a connection before anything decodes it, and to bound how many bytes one
// message may take.
//
// It must never allocate from a length a message declares, and never decode
// or interpret a payload.
package msgpackscan
