package bulkwrite

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"connectrpc.com/connect"

	bw "github.com/bulkwrite/bulkwrite/clients/go/bulkwritev1"
)

// JobOptions shape SendJob. Resume with the same PartSize, Lane and encoding (WithJSON or
// not): a resent part must be byte for byte the part sent before, or the proxy refuses it
// (aborted, 409).
type JobOptions struct {
	// PartSize is the ops per part (per request); 1,000 when 0. A job has at most
	// 1,000,000 parts.
	PartSize int
	// InFlight is how many parts may be on their way at once; 1 when 0. With more, a
	// part waits while a part in flight touches one of its objects (the same object type
	// and id), so that each object's ops still reach its shard in the stream's order; the
	// last part goes once every other part is answered, so that it seals a job whose
	// parts are all in.
	InFlight int
	// Lane is the priority lane ("" is "default").
	Lane string
	// OnPart, if set, is called after each part is answered or skipped, one call at a time.
	OnPart func(PartResult)
}

// PartResult is what became of one part.
type PartResult struct {
	Part     uint32
	Ops      int
	Skipped  bool   // below the job's next_part when resumed: the proxy held it whole, not sent
	Accepted uint32 // ops durably in Kafka (as the proxy's last answer to the part says)
	Rejected []*bw.OpRejection
	Resends  int    // times it was sent again after 429 or 503
	JobID    string // the job's id, as the proxy answered (empty when skipped)
}

// Rejection is an op the proxy refused for good at submission (invalid, out of the
// client's scopes): it was not sent to its shard, and sending it again as it is fails again.
type Rejection struct {
	Part   uint32
	Index  uint32 // in its part
	Reason string
	Op     *bw.Op
}

// JobResult sums a SendJob.
type JobResult struct {
	JobID    string
	Parts    uint32 // parts in the stream
	Sent     uint32 // parts sent by this run (the others were skipped)
	Accepted uint64 // ops the proxy holds of the parts sent by this run
	Rejected []Rejection
}

// part is a slice of the stream: its number, its ops, and whether it ends the stream.
type part struct {
	n    uint32
	ops  []*bw.Op
	last bool
}

// maxParts is the proxy's bound on a job's part numbers (0 to 999,999).
const maxParts = 1_000_000

// parts cuts ops into parts of size ops, reading one op ahead so that the last part is
// known as the last when it is cut. An empty stream is one error.
func parts(ops Ops, size int) iter.Seq2[part, error] {
	return func(yield func(part, error) bool) {
		next, stop := iter.Pull2(ops)
		defer stop()
		op, err, ok := next()
		if !ok {
			yield(part{}, errors.New("bulkwrite: the job has no ops"))
			return
		}
		for n := uint32(0); ; n++ {
			if n == maxParts {
				yield(part{}, fmt.Errorf("bulkwrite: more than %d parts: raise PartSize", maxParts))
				return
			}
			p := part{n: n, ops: make([]*bw.Op, 0, size)}
			for ok && len(p.ops) < size {
				if err != nil {
					yield(part{}, err)
					return
				}
				p.ops = append(p.ops, op)
				op, err, ok = next()
			}
			p.last = !ok
			if !yield(p, nil) || p.last {
				return
			}
		}
	}
}

// object names one object: its type and id. A create without an id has none (the table
// assigns it), so nothing can be ordered after it.
type object struct {
	typ string
	id  uint64
}

func objectsOf(p part) map[object]struct{} {
	set := make(map[object]struct{}, len(p.ops))
	for _, op := range p.ops {
		if op.GetId() != 0 {
			set[object{op.GetObjectType(), op.GetId()}] = struct{}{}
		}
	}
	return set
}

// flight is the parts on their way and the objects they touch.
type flight struct {
	objects map[uint32]map[object]struct{}
}

// clear says whether p may go now: fewer than max parts in flight, none touching an
// object of p, and p not the last while any other is in flight.
func (f *flight) clear(p part, objs map[object]struct{}, max int) bool {
	if len(f.objects) == 0 {
		return true
	}
	if p.last || len(f.objects) >= max {
		return false
	}
	for _, other := range f.objects {
		small, big := objs, other
		if len(small) > len(big) {
			small, big = big, small
		}
		for o := range small {
			if _, ok := big[o]; ok {
				return false
			}
		}
	}
	return true
}

// SendJob sends ops as the named job name (docs/jobs.md): parts 0, 1, 2, … of
// opts.PartSize ops, the last one marked as the last. Run again with the same name and
// ops after a crash, it resumes: part 0 is sent again (the proxy answers it from its
// record), the parts below the job's next_part are read past without being sent, and the
// rest are sent; a part the proxy already held is the same part, so no op is applied
// twice. Each part is resent after 429 and 503 as the Retry policy says, the same bytes
// each time, so the proxy takes only the ops it had not taken. It returns once every part
// is answered (not applied: Follow waits for that), or at the first error that is not a
// refusal of single ops.
func (c *Client) SendJob(ctx context.Context, name string, ops Ops, opts JobOptions) (*JobResult, error) {
	size, inFlight := opts.PartSize, opts.InFlight
	if size <= 0 {
		size = 1000
	}
	if inFlight <= 0 {
		inFlight = 1
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := &JobResult{}
	var nextPart uint32
	account := func(p part, pr PartResult) {
		res.Parts = max(res.Parts, p.n+1)
		if res.JobID == "" {
			res.JobID = pr.JobID
		}
		if !pr.Skipped {
			res.Sent++
			res.Accepted += uint64(pr.Accepted)
		}
		for _, r := range pr.Rejected {
			if !r.GetRetryable() && int(r.GetIndex()) < len(p.ops) {
				res.Rejected = append(res.Rejected, Rejection{p.n, r.GetIndex(), r.GetReason(), p.ops[r.GetIndex()]})
			}
		}
		if opts.OnPart != nil {
			opts.OnPart(pr)
		}
	}

	type answer struct {
		p   part
		pr  PartResult
		err error
	}
	done := make(chan answer)
	f := flight{objects: map[uint32]map[object]struct{}{}}
	var firstErr error
	settle := func() { // waits for one part in flight to be answered
		a := <-done
		delete(f.objects, a.p.n)
		if a.err != nil {
			if firstErr == nil {
				firstErr = a.err
				cancel()
			}
			return
		}
		account(a.p, a.pr)
	}

	for p, err := range parts(ops, size) {
		if err != nil {
			firstErr = err
			break
		}
		if p.n == 0 {
			// alone, before anything else: its answer names the job, and the job's
			// status then says where a resumed upload goes on
			pr, err := c.sendPart(ctx, name, opts.Lane, p)
			if err != nil {
				return res, err
			}
			account(p, pr)
			if p.last {
				break
			}
			st, err := c.GetJob(ctx, res.JobID)
			if err != nil {
				return res, fmt.Errorf("bulkwrite: job %s: %w", res.JobID, err)
			}
			nextPart = st.GetNextPart()
			continue
		}
		if p.n < nextPart {
			account(p, PartResult{Part: p.n, Ops: len(p.ops), Skipped: true})
			continue
		}
		objs := objectsOf(p)
		for firstErr == nil && !f.clear(p, objs, inFlight) {
			settle()
		}
		if firstErr != nil {
			break
		}
		f.objects[p.n] = objs
		go func(p part) {
			pr, err := c.sendPart(ctx, name, opts.Lane, p)
			done <- answer{p, pr, err}
		}(p)
	}
	for len(f.objects) > 0 {
		settle()
	}
	return res, firstErr
}

// sendPart sends part p until the proxy has answered every op of it for good.
func (c *Client) sendPart(ctx context.Context, name, lane string, p part) (PartResult, error) {
	req := &bw.BatchWriteRequest{Job: name, JobPart: p.n, JobLast: p.last, Lane: lane, Ops: p.ops}
	pr := PartResult{Part: p.n, Ops: len(p.ops)}
	reply, err := c.write(ctx, req, &pr.Resends)
	if err != nil {
		return pr, fmt.Errorf("bulkwrite: job %q part %d: %w", name, p.n, err)
	}
	pr.Accepted, pr.Rejected, pr.JobID = reply.GetAccepted(), reply.GetRejected(), reply.GetJobId()
	return pr, nil
}

// WriteBatch sends one request, and again after 429 and 503 as the Retry policy says
// (safe with a request_id or a named job's part: what the proxy took before is not taken
// twice; without either, an answer that took some ops is returned as it is, with its
// retryable rejections, since a resend could apply the taken ones twice).
// Ops refused for good are in the reply's rejected[], not an error: the error is for a
// request refused whole (invalid_argument, permission_denied, aborted, …). An answer
// refusing every op (422, or 403 for scopes) comes back as its reply, not an error.
func (c *Client) WriteBatch(ctx context.Context, req *bw.BatchWriteRequest) (*bw.BatchWriteResponse, error) {
	return c.write(ctx, req, nil)
}

func (c *Client) write(ctx context.Context, req *bw.BatchWriteRequest, resends *int) (*bw.BatchWriteResponse, error) {
	resendable := req.GetJob() != "" || req.GetRequestId() != ""
	var reply *bw.BatchWriteResponse
	sends := 0
	err := c.retry.do(ctx, func() error {
		sends++
		res, err := c.rpc.WriteBatch(ctx, connect.NewRequest(req))
		if err == nil {
			reply = res.Msg
			if hasRetryable(reply) && resendable { // not expected with a 200, but taken at its word
				return connect.NewError(connect.CodeUnavailable, errors.New("ops answered retryable"))
			}
			return nil
		}
		if Retryable(err) {
			// resent when it is safe: a part or request_id is taken once, and a reply-less
			// answer (a quota, other settings) took nothing; else the rejections tell
			if r := BatchReply(err); r != nil && !resendable {
				reply = r
				return nil
			}
			return err
		}
		if r := BatchReply(err); r != nil {
			reply = r // refused op by op (422, 403 scopes): the rejections say why
			return nil
		}
		return err
	})
	if resends != nil {
		*resends = sends - 1
	}
	if err != nil {
		return nil, err
	}
	if reply == nil {
		return nil, errors.New("bulkwrite: a retryable answer without a reply")
	}
	return reply, nil
}

func hasRetryable(r *bw.BatchWriteResponse) bool {
	for _, x := range r.GetRejected() {
		if x.GetRetryable() {
			return true
		}
	}
	return false
}
