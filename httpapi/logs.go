package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/weft-sched/weft/rpc"
)

// logParams are the query parameters of a container's logs.
var logParams = []string{"stream", "offset", "follow"}

// Headers of a logs answer.
const (
	// HeaderLogOffset is the offset after the bytes of the answer: pass it
	// as ?offset= to read on.
	HeaderLogOffset = "X-Weft-Log-Offset"
	// HeaderLogDone is "true" when the container has ended and the answer
	// reaches the end of its log.
	HeaderLogDone = "X-Weft-Log-Done"
)

// maxLogAnswer bounds the bytes one answer without ?follow carries; the
// client reads on from X-Weft-Log-Offset.
const maxLogAnswer = 8 * rpc.MaxLogChunk

// logPoll is how often a followed log asks for more while the container
// runs and has written nothing new.
const logPoll = 500 * time.Millisecond

// logs answers a container's stdout or stderr from ?offset= (text/plain):
// what there is now, or with ?follow=true a chunked stream that goes on
// until the container is done, the client goes away or Limits.MaxFollow
// passes.
func (a *api) logs(q *request) error {
	req := rpc.ContainerLogsRequest{RequestHeader: q.header, ID: q.r.PathValue("id"), Stream: rpc.StreamStdout}
	if q.query.Has("stream") {
		req.Stream = q.query.Get("stream")
		if req.Stream != rpc.StreamStdout && req.Stream != rpc.StreamStderr {
			return badRequest("stream: %q; give stdout or stderr", req.Stream)
		}
	}
	if q.query.Has("offset") {
		n, err := strconv.ParseInt(q.query.Get("offset"), 10, 64)
		if err != nil || n < 0 {
			return badRequest("offset: %q is not a byte offset (0 or more)", q.query.Get("offset"))
		}
		req.Offset = n
	}
	follow, err := q.boolParam("follow")
	if err != nil {
		return err
	}
	if follow {
		return a.followLogs(q, req)
	}
	var data []byte
	var done bool
	for {
		var resp rpc.ContainerLogsResponse
		if err := a.call(q, "Container.Logs", &req, &resp); err != nil {
			return err
		}
		data = append(data, resp.Data...)
		req.Offset, done = resp.NextOffset, resp.Done
		if len(resp.Data) < rpc.MaxLogChunk || len(data) >= maxLogAnswer {
			break
		}
	}
	h := q.w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set(HeaderLogOffset, strconv.FormatInt(req.Offset, 10))
	h.Set(HeaderLogDone, strconv.FormatBool(done))
	q.w.WriteHeader(http.StatusOK)
	q.w.Write(data)
	return nil
}

// followLogs streams the log as it grows. The first read decides the
// status (an unknown container is a 404); after that an error ends the
// stream.
func (a *api) followLogs(q *request, req rpc.ContainerLogsRequest) error {
	ctx, cancel := context.WithTimeout(q.r.Context(), a.limits.MaxFollow)
	defer cancel()
	rc := http.NewResponseController(q.w)
	started := false
	for {
		var resp rpc.ContainerLogsResponse
		if err := a.call(&request{w: q.w, r: q.r.WithContext(ctx)}, "Container.Logs", &req, &resp); err != nil {
			if !started {
				return err
			}
			if ctx.Err() == nil {
				a.logger.Debug("followed log ended on an error", "container", req.ID, "error", err)
			}
			return nil
		}
		if !started {
			q.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			q.w.Header().Set("Cache-Control", "no-store")
			q.w.Header().Set("X-Content-Type-Options", "nosniff")
			q.w.WriteHeader(http.StatusOK)
			started = true
			if q.r.Method == http.MethodHead {
				return nil // the status and headers: no stream to follow
			}
		}
		rc.SetWriteDeadline(time.Now().Add(time.Minute)) // a stalled reader ends the stream
		if len(resp.Data) > 0 {
			if _, err := q.w.Write(resp.Data); err != nil {
				return nil // the client went away
			}
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
		req.Offset = resp.NextOffset
		if len(resp.Data) == rpc.MaxLogChunk {
			continue
		}
		if resp.Done {
			return nil
		}
		t := time.NewTimer(logPoll)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil
		}
	}
}
