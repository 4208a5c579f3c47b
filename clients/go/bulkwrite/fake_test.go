package bulkwrite

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	bw "github.com/bulkwrite/bulkwrite/clients/go/bulkwritev1"
	"github.com/bulkwrite/bulkwrite/clients/go/bulkwritev1/bulkwritev1connect"
)

// fakeProxy is the Connect endpoint as docs/jobs.md describes named jobs, in memory: a
// part is taken once, a resent part must be byte for byte the same body (else aborted),
// next_part is the lowest part not taken, and parts listed in busy are answered
// resource_exhausted with a Retry-After and the partial reply, as a full backlog is.
type fakeProxy struct {
	bulkwritev1connect.UnimplementedBulkwriteServiceHandler
	mu        sync.Mutex
	bodies    map[uint32][]byte // part -> the first body that carried it
	sends     map[uint32]int    // part -> requests that carried it
	taken     []uint32          // parts in the order they were first taken whole
	sealed    bool
	last      uint32
	busy      map[uint32]int // part -> 429s still to answer
	delay     time.Duration  // each WriteBatch takes this long
	inFlight  map[object]uint32
	overlaps  []string // an object in two parts in flight at once
	maxFlight int
	flying    int
	lastEarly bool // the last part arrived while another was in flight
	cancelled bool
}

func newFake() *fakeProxy {
	return &fakeProxy{bodies: map[uint32][]byte{}, sends: map[uint32]int{}, busy: map[uint32]int{},
		inFlight: map[object]uint32{}}
}

const fakeJobID = "0123456789abcdef0123456789abcdef"

// start serves f; the middleware compares each WriteBatch body with the part's first.
func (f *fakeProxy) start(t *testing.T) string {
	_, h := bulkwritev1connect.NewBulkwriteServiceHandler(f)
	mux := http.NewServeMux()
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/WriteBatch") {
			h.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var req bw.BatchWriteRequest
		var err error
		if strings.Contains(r.Header.Get("Content-Type"), "json") {
			err = protojson.Unmarshal(body, &req)
		} else {
			err = proto.Unmarshal(body, &req)
		}
		if err != nil {
			t.Errorf("fake proxy: a body that does not decode: %v", err)
		}
		f.mu.Lock()
		first, seen := f.bodies[req.JobPart]
		if !seen {
			f.bodies[req.JobPart] = body
		}
		f.mu.Unlock()
		if seen && !bytes.Equal(first, body) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			fmt.Fprintf(w, `{"code":"aborted","message":"part %d was sent with a different body"}`, req.JobPart)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

func (f *fakeProxy) WriteBatch(ctx context.Context, req *connect.Request[bw.BatchWriteRequest]) (*connect.Response[bw.BatchWriteResponse], error) {
	m := req.Msg
	objs := objectsOf(part{ops: m.Ops})
	f.mu.Lock()
	if f.cancelled {
		f.mu.Unlock()
		return nil, connect.NewError(connect.CodeAborted, errors.New("job was cancelled"))
	}
	f.sends[m.JobPart]++
	if m.JobLast && f.flying > 0 {
		f.lastEarly = true
	}
	f.flying++
	f.maxFlight = max(f.maxFlight, f.flying)
	for o := range objs {
		if other, ok := f.inFlight[o]; ok {
			f.overlaps = append(f.overlaps, fmt.Sprintf("%v in parts %d and %d", o, other, m.JobPart))
		}
		f.inFlight[o] = m.JobPart
	}
	f.mu.Unlock()
	time.Sleep(f.delay)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.flying--
	for o := range objs {
		delete(f.inFlight, o)
	}
	reply := &bw.BatchWriteResponse{JobId: fakeJobID}
	if f.busy[m.JobPart] > 0 { // the first half taken, the rest refused for now
		f.busy[m.JobPart]--
		reply.Accepted = uint32(len(m.Ops) / 2)
		for i := len(m.Ops) / 2; i < len(m.Ops); i++ {
			reply.Rejected = append(reply.Rejected, &bw.OpRejection{Index: uint32(i), Reason: "shard 0's backlog is full", Retryable: true})
		}
		err := connect.NewError(connect.CodeResourceExhausted, errors.New("a shard's backlog is full"))
		err.Meta().Set("Retry-After", "2")
		if d, derr := connect.NewErrorDetail(reply); derr == nil {
			err.AddDetail(d)
		}
		return nil, err
	}
	reply.Accepted = uint32(len(m.Ops))
	for i, op := range m.Ops { // a title of more than 8 bytes is refused, as max_length does
		for _, fl := range op.Fields {
			if fl.Name == "title" && len(fl.GetValue().GetStringValue()) > 8 {
				reply.Accepted--
				reply.Rejected = append(reply.Rejected, &bw.OpRejection{Index: uint32(i), Reason: `field "title": too long`})
			}
		}
	}
	if !f.isTaken(m.JobPart) {
		f.taken = append(f.taken, m.JobPart)
	}
	if m.JobLast {
		f.sealed, f.last = true, m.JobPart
	}
	if reply.Accepted == 0 {
		err := connect.NewError(connect.CodeInvalidArgument, errors.New("no op is valid"))
		if d, derr := connect.NewErrorDetail(reply); derr == nil {
			err.AddDetail(d)
		}
		return nil, err
	}
	return connect.NewResponse(reply), nil
}

func (f *fakeProxy) isTaken(p uint32) bool {
	for _, q := range f.taken {
		if q == p {
			return true
		}
	}
	return false
}

func (f *fakeProxy) GetJob(ctx context.Context, req *connect.Request[bw.GetJobRequest]) (*connect.Response[bw.JobStatus], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	next := uint32(0)
	for f.isTaken(next) {
		next++
	}
	return connect.NewResponse(&bw.JobStatus{JobId: req.Msg.JobId, Named: true, NextPart: next, Parts: uint32(len(f.taken)),
		Sealed: f.sealed, LastPart: f.last, Finished: f.sealed && next > f.last, Cancelled: 0}), nil
}

func (f *fakeProxy) CancelJob(ctx context.Context, req *connect.Request[bw.CancelJobRequest]) (*connect.Response[bw.JobStatus], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancelled = true
	return connect.NewResponse(&bw.JobStatus{JobId: req.Msg.JobId, CancelReason: req.Msg.Reason}), nil
}

// ListFailures: 7 failures in pages of the asked size, the cursor a failure's number.
func (f *fakeProxy) ListFailures(ctx context.Context, req *connect.Request[bw.ListFailuresRequest]) (*connect.Response[bw.ListFailuresResponse], error) {
	start := 0
	if req.Msg.After != "" {
		fmt.Sscan(req.Msg.After, &start)
	}
	res := &bw.ListFailuresResponse{JobId: req.Msg.JobId}
	for i := start; i < 7 && len(res.Failures) < int(req.Msg.Limit); i++ {
		res.Failures = append(res.Failures, &bw.JobFailure{OpIndex: uint32(i), ErrorCode: 1062, Reason: "Duplicate entry"})
		if i+1 < 7 {
			res.Next = fmt.Sprint(i + 1)
		} else {
			res.Next = ""
		}
	}
	return connect.NewResponse(res), nil
}
