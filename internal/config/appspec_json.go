package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// An app spec in JSON (a file ending in .json, or starting with "{", and
// every body of the HTTP API's POST /v1/apps) is read by encoding/json into
// the blocks the HCL form decodes into, and then checked by the same code.
// HCL's JSON parser kept about 30 times a realistic spec's size (a
// MapReduce job of 10,000 splits, 2.8 MB, peaked at 84 MB) and hundreds of
// times an adversarial one; encoding/json keeps about twice.

// MaxAppSpecValues bounds the values (object keys count) of a JSON app
// spec of n bytes: 1,024, and one per 4 bytes beyond. A realistic spec
// has one per 20 or more (a split, a path and three nodes in ~190 bytes);
// one packed with empty values is refused before it is decoded, so that
// what decoding allocates stays a few times the body's size.
func MaxAppSpecValues(n int) int { return 1024 + n/8 }

// splitBlocks are a job's splits: a JSON array, or (as HCL's JSON syntax
// allows for one block) an object.
type splitBlocks []splitBlock

// UnmarshalJSON reads an array of splits or a single one.
func (s *splitBlocks) UnmarshalJSON(b []byte) error {
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '{' {
		var one splitBlock
		if err := strictJSON(t, &one); err != nil {
			return err
		}
		*s = splitBlocks{one}
		return nil
	}
	return strictJSON(b, (*[]splitBlock)(s))
}

// strictJSON decodes one JSON value, refusing fields the type lacks.
func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// decodeAppFileJSON reads an app spec's JSON form; errors name the file,
// line and column, and the field.
func decodeAppFileJSON(filename string, src []byte) (appFile, error) {
	var af appFile
	dec := json.NewDecoder(bytes.NewReader(src))
	dec.DisallowUnknownFields()
	err := dec.Decode(&af)
	if err == nil && dec.More() {
		err = fmt.Errorf("more than one JSON value; give one object")
	}
	if err == nil {
		return af, nil
	}
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return af, fmt.Errorf("%s: the JSON ends before its object does", at(filename, src, int64(len(src))))
	case errors.As(err, &syntax):
		return af, fmt.Errorf("%s: %s", at(filename, src, syntax.Offset), syntax.Error())
	case errors.As(err, &typ):
		return af, fmt.Errorf("%s: %s: %s is not %s", at(filename, src, typ.Offset), typ.Field, typ.Value, jsonKind(typ.Type))
	}
	return af, fmt.Errorf("%s: %s", filename, strings.TrimPrefix(err.Error(), "json: "))
}

// at names the line and column of byte offset in src, as HCL's errors do.
func at(filename string, src []byte, offset int64) string {
	offset = min(max(offset, 0), int64(len(src)))
	before := src[:offset]
	line := bytes.Count(before, []byte("\n")) + 1
	col := len(before) - bytes.LastIndexByte(before, '\n')
	return fmt.Sprintf("%s:%d,%d", filename, line, col)
}

// jsonKind names what JSON a Go type takes.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "of the right type"
}
