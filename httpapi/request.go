package httpapi

import (
	"bytes"
	"errors"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/weft-sched/weft/rpc"
)

// request is one parsed HTTP request, ready to call a method with.
type request struct {
	w     http.ResponseWriter
	r     *http.Request
	query url.Values
	// header carries the token and, for reads, the consistency asked for.
	header rpc.RequestHeader
	// bodyLimit is the most of the body that may be read: the route's
	// cap, within which admit reserved its cost.
	bodyLimit int64
}

// Query parameters every read route takes (SPEC §16, consistency).
const (
	paramStale = "stale"
	paramIndex = "index"
	paramWait  = "wait"
)

// Headers of the API.
const (
	// HeaderToken carries the ACL token's secret (or Authorization: Bearer).
	HeaderToken = "X-Weft-Token"
	// HeaderIndex carries the Raft index of the state an answer comes
	// from: pass it back as ?index= to wait for a change.
	HeaderIndex = "X-Weft-Index"
	// HeaderRequestID, on a write, names it: the same write sent again
	// with the same ID (a retry after a lost answer) is applied at most
	// once and answered as the first was. Without it each request is a
	// new write.
	HeaderRequestID = "X-Weft-Request-Id"
	// HeaderKnownLeader and HeaderLastContact say how stale a ?stale
	// answer may be.
	HeaderKnownLeader = "X-Weft-Known-Leader"
	HeaderLastContact = "X-Weft-Last-Contact"
	// HeaderUnreachable, on a list a federation's router merged, names
	// the sub-clusters it could not include, each with why, separated by
	// "; " (what they hold is missing from the list, not gone).
	HeaderUnreachable = "X-Weft-Unreachable"
)

// badRequest is an answer 400 that names what was wrong.
func badRequest(format string, a ...any) error {
	return rpc.Errorf(rpc.CodeBadRequest, format, a...)
}

// parse checks the request's query parameters against the route's and
// builds the request header: token, stale, blocking query.
func (a *api) parse(w http.ResponseWriter, r *http.Request, rt route) (*request, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, badRequest("query string: %v", err)
	}
	allowed := rt.params
	if rt.read {
		allowed = append(slices.Clip(allowed), paramStale, paramIndex, paramWait)
	}
	for name, vals := range q {
		if !slices.Contains(allowed, name) {
			return nil, badRequest("unknown query parameter %q; %s takes %s", name, rt.path, describeParams(allowed))
		}
		if len(vals) > 1 {
			return nil, badRequest("query parameter %q given %d times; give it once", name, len(vals))
		}
	}
	req := &request{w: w, r: r, query: q}
	if req.header.AuthToken, err = token(r); err != nil {
		return nil, err
	}
	if rt.read {
		if err := readHeader(q, &req.header); err != nil {
			return nil, err
		}
	} else if req.header.RequestID = r.Header.Get(HeaderRequestID); req.header.RequestID == "" {
		req.header.RequestID = rpc.NewRequestID()
	} else if err := req.header.ValidateRequestID(); err != nil {
		return nil, badRequest("%s header: %v", HeaderRequestID, err)
	}
	return req, nil
}

func describeParams(ps []string) string {
	if len(ps) == 0 {
		return "no query parameters"
	}
	s := slices.Clone(ps)
	sort.Strings(s)
	return "only " + strings.Join(s, ", ")
}

// token is the ACL secret of the request: X-Weft-Token or
// Authorization: Bearer; giving two different ones is an error.
func token(r *http.Request) (string, error) {
	tok := strings.TrimSpace(r.Header.Get(HeaderToken))
	if auth := r.Header.Get("Authorization"); auth != "" {
		scheme, bearer, ok := strings.Cut(strings.TrimSpace(auth), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(bearer) == "" {
			return "", badRequest("Authorization header: give \"Bearer TOKEN\" (or the token in %s)", HeaderToken)
		}
		bearer = strings.TrimSpace(bearer)
		if tok != "" && tok != bearer {
			return "", badRequest("%s and Authorization carry different tokens; give one", HeaderToken)
		}
		tok = bearer
	}
	return tok, nil
}

// readHeader maps ?stale and the blocking query ?index=&wait= onto h.
func readHeader(q url.Values, h *rpc.RequestHeader) error {
	if q.Has(paramStale) {
		switch v := q.Get(paramStale); v {
		case "", "true", "1":
			h.AllowStale = true
		case "false", "0":
		default:
			return badRequest("stale: %q is not a boolean; give ?stale or ?stale=true", v)
		}
	}
	if q.Has(paramIndex) {
		n, err := strconv.ParseUint(q.Get(paramIndex), 10, 64)
		if err != nil {
			return badRequest("index: %q is not an index; give the %s of an earlier answer", q.Get(paramIndex), HeaderIndex)
		}
		h.MinQueryIndex = n
	}
	if q.Has(paramWait) {
		if !q.Has(paramIndex) {
			return badRequest("wait: give index as well (?index=N&wait=30s blocks until the state passes N)")
		}
		d, err := parseWait(q.Get(paramWait))
		if err != nil {
			return err
		}
		h.MaxWait = d
	}
	return nil
}

// parseWait reads a blocking query's wait: a Go duration ("30s", "2m"),
// or seconds ("30"), above 0 and at most rpc.MaxBlockingWait.
func parseWait(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		n, nerr := strconv.ParseUint(v, 10, 32)
		if nerr != nil {
			return 0, badRequest("wait: %q is not a duration; give e.g. 30s or 5m", v)
		}
		d = time.Duration(n) * time.Second
	}
	if d <= 0 || d > rpc.MaxBlockingWait {
		return 0, badRequest("wait: %s is out of range; give more than 0 and at most %s", v, rpc.MaxBlockingWait)
	}
	return d, nil
}

// body reads the request's whole body, at most bodyLimit bytes (what
// admit reserved the cost of).
func (q *request) body() ([]byte, error) {
	if q.bodyLimit == 0 {
		return nil, nil // none was declared: admit let in no body
	}
	rc := http.NewResponseController(q.w)
	rc.SetReadDeadline(time.Now().Add(BodyTimeout))
	var buf bytes.Buffer
	if n := q.r.ContentLength; n > 0 {
		buf.Grow(int(n) + bytes.MinRead) // within bodyLimit: admit refused more; ReadFrom wants MinRead spare
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(q.w, q.r.Body, q.bodyLimit))
	rc.SetReadDeadline(time.Time{})
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, rpc.Errorf(rpc.CodeTooLarge, "request body is larger than %d bytes; nothing was changed", tooBig.Limit)
	}
	if err != nil {
		return nil, badRequest("reading the request body: %v", err)
	}
	return buf.Bytes(), nil
}

// boolParam reads an optional boolean query parameter.
func (q *request) boolParam(name string) (bool, error) {
	if !q.query.Has(name) {
		return false, nil
	}
	switch v := q.query.Get(name); v {
	case "", "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	default:
		return false, badRequest("%s: %q is not a boolean; give true or false", name, v)
	}
}

// remoteAddr is the client's address, for the request's ConnInfo.
func remoteAddr(r *http.Request) net.Addr {
	if a, err := net.ResolveTCPAddr("tcp", r.RemoteAddr); err == nil {
		return a
	}
	return nil
}
