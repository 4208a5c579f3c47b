package bulkwrite

import (
	"context"
	"fmt"
	"iter"
	"time"

	bw "github.com/bulkwrite/bulkwrite/clients/go/bulkwritev1"
)

// FollowOptions shape Follow.
type FollowOptions struct {
	// Interval between two looks at the job; 1 s when 0.
	Interval time.Duration
	// OnStatus, if set, sees every status read, the last (finished) one included.
	// Waits(st) says why shards hold the job back.
	OnStatus func(*bw.JobStatus)
}

// Follow reads the job's status until it is finished (nothing pending, every shard
// answered; a named job also sealed with every part in) and returns the last status. A
// finished job may still have failed, cancelled or lost ops: the status counts them.
func (c *Client) Follow(ctx context.Context, jobID string, opts FollowOptions) (*bw.JobStatus, error) {
	interval := opts.Interval
	if interval <= 0 {
		interval = time.Second
	}
	for {
		st, err := c.GetJob(ctx, jobID)
		if err != nil {
			return nil, err
		}
		if opts.OnStatus != nil {
			opts.OnStatus(st)
		}
		if st.GetFinished() {
			return st, nil
		}
		if err := c.retry.wait(ctx, interval); err != nil {
			return st, err
		}
	}
}

// Waits says, one line per shard, why shards hold the job's pending ops back (paused,
// throttled, a full backlog, held until a time, a prerequisite, an error), as the proxy
// sees it: "shard 3 is paused by alice: reindex". Empty when no shard waits, or when the
// proxy is older than JobShard.waits.
func Waits(st *bw.JobStatus) []string {
	var out []string
	for _, sh := range st.GetShards() {
		w := sh.GetWaits()
		if w == nil || w.GetKind() == bw.WaitKind_WAIT_KIND_UNSPECIFIED {
			continue
		}
		if w.GetDetail() != "" { // the proxy's words name the shard
			out = append(out, w.GetDetail())
		} else {
			out = append(out, fmt.Sprintf("shard %d: %s", sh.GetShard(), w.GetKind()))
		}
	}
	return out
}

// FailureFilter narrows Failures.
type FailureFilter struct {
	Code     uint32 // only this MySQL error number (1062 duplicate key, 1406 too long, …)
	Reason   string // only failures whose reason contains this text
	PageSize uint32 // failures per call, 1 to 1000 (100 when 0)
}

// Failures streams every op of the job a shard refused, each with its reason and the op
// as sent (op_json), page by page through ListFailures' cursor.
func (c *Client) Failures(ctx context.Context, jobID string, f FailureFilter) iter.Seq2[*bw.JobFailure, error] {
	return func(yield func(*bw.JobFailure, error) bool) {
		after := ""
		for {
			req := &bw.ListFailuresRequest{JobId: jobID, Limit: f.PageSize, After: after, Code: f.Code, Reason: f.Reason}
			page, err := call(ctx, c.retry, c.rpc.ListFailures, req)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, x := range page.GetFailures() {
				if !yield(x, nil) {
					return
				}
			}
			if page.GetNext() == "" {
				return
			}
			after = page.GetNext()
		}
	}
}
