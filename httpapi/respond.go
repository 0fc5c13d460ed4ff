package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/weft-sched/weft/rpc"
)

// errorBody is every error answer: {"error": "one line that says what to do"}.
type errorBody struct {
	Error string `json:"error"`
}

// statusOf maps an rpc error code onto the HTTP status of SPEC §16.
func statusOf(err error) int {
	switch rpc.ErrorCode(err) {
	case rpc.CodeBadRequest:
		return http.StatusBadRequest
	case rpc.CodePermissionDenied:
		return http.StatusForbidden
	case rpc.CodeNotFound:
		return http.StatusNotFound
	case rpc.CodeConflict, rpc.CodeStale:
		return http.StatusConflict
	case rpc.CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case rpc.CodeNoLeader, rpc.CodeNotReady, rpc.CodeUnavailable, rpc.CodeUnreachable:
		return http.StatusServiceUnavailable
	case rpc.CodeTimeout:
		return http.StatusGatewayTimeout
	case rpc.CodeRateLimited:
		return http.StatusTooManyRequests
	}
	var te *rpc.TransportError
	if errors.As(err, &te) {
		return http.StatusServiceUnavailable // an agent could not reach the servers
	}
	return http.StatusInternalServerError
}

// fail answers err. Retryable conditions say when to retry.
func (a *api) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := statusOf(err)
	if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	if status == http.StatusInternalServerError {
		a.logger.Error("HTTP request failed", "method", r.Method, "path", r.URL.Path, "error", err)
	}
	msg := err.Error()
	if status == http.StatusForbidden && r.Header.Get(HeaderToken) == "" && r.Header.Get("Authorization") == "" {
		msg += " (over HTTP, send the token in the " + HeaderToken + " header or as Authorization: Bearer)"
	}
	writeError(w, status, msg)
}

// writeError answers status with the message on one line.
func writeError(w http.ResponseWriter, status int, msg string) {
	msg = strings.Join(strings.Fields(strings.ReplaceAll(msg, "\n", "; ")), " ")
	writeJSON(w, status, errorBody{Error: msg})
}

// writeJSON answers v as indented JSON, as the CLI's -json prints it.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(errorBody{Error: "encoding the answer: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// setMeta puts a read answer's index and staleness in the headers.
func setMeta(w http.ResponseWriter, m *rpc.ResponseMeta) {
	setIndex(w, m.Index)
	w.Header().Set(HeaderKnownLeader, strconv.FormatBool(m.KnownLeader))
	w.Header().Set(HeaderLastContact, strconv.FormatInt(m.LastContact.Milliseconds(), 10))
}

// setIndex puts the index of an answer or a write in the headers; 0
// (an answer no state index describes, a write that changed nothing)
// sets none.
func setIndex(w http.ResponseWriter, index uint64) {
	if index != 0 {
		w.Header().Set(HeaderIndex, strconv.FormatUint(index, 10))
	}
}

// orEmpty makes a nil list an empty one, so lists are [] in JSON, never
// null (as the CLI prints them).
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// setUnreachable names, in HeaderUnreachable, the sub-clusters a merged
// list left out.
func setUnreachable(w http.ResponseWriter, unreachable []string) {
	if len(unreachable) > 0 {
		w.Header().Set(HeaderUnreachable, strings.Join(unreachable, "; "))
	}
}
