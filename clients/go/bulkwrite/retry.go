package bulkwrite

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	bw "github.com/bulkwrite/bulkwrite/clients/go/bulkwritev1"
)

// Retry says when a call is sent again. A proxy answers resource_exhausted (HTTP 429: a
// shard's backlog is full, or the client is over a quota) and unavailable (503: Kafka did
// not acknowledge, the proxy's settings differ, a job record cannot be read now) with a
// Retry-After in whole seconds; both are resent after it. Sending the same request again
// is safe: a named job's part, like a request_id, is applied once however often it comes.
type Retry struct {
	// For bounds how long unavailable (and a lost connection, which connect-go reports as
	// unavailable) is resent; resource_exhausted is resent as long as the context lives,
	// since a full backlog drains as fast as its shard applies (bwctl does the same).
	For time.Duration
	// Backoff is the first wait when the answer has no Retry-After, doubled on each
	// resend up to MaxBackoff.
	Backoff, MaxBackoff time.Duration
	// OnWait, if set, hears of each wait before a resend: the answer that caused it and
	// how long (RetryAfter(err) says whether the proxy asked for it). Calls may overlap
	// when parts are in flight together.
	OnWait func(err error, wait time.Duration)

	sleep func(context.Context, time.Duration) error // tests replace it
}

// DefaultRetry is New's policy.
var DefaultRetry = Retry{For: 60 * time.Second, Backoff: 200 * time.Millisecond, MaxBackoff: 5 * time.Second}

// Retryable says whether err is an answer after which the same request may be sent again.
func Retryable(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeResourceExhausted, connect.CodeUnavailable:
		return true
	}
	return false
}

// RetryAfter is the wait the proxy asked for with err (its Retry-After header, which
// connect-go keeps in the error's metadata): whole seconds, or an HTTP date.
func RetryAfter(err error) (time.Duration, bool) {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return 0, false
	}
	return parseRetryAfter(ce.Meta().Get("Retry-After"), time.Now())
}

func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseUint(v, 10, 32); err == nil {
		return time.Duration(secs) * time.Second, true
	}
	if at, err := http.ParseTime(v); err == nil {
		if d := at.Sub(now); d > 0 {
			return d, true
		}
		return 0, true
	}
	return 0, false
}

// BatchReply is the BatchWriteResponse a WriteBatch error carries as a detail (422 none
// valid, 403 scopes, 429 a full backlog, 503 Kafka): its accepted ops are durable and its
// rejected[] say which ops were refused, and whether for now only (retryable). nil when
// the error has none (nothing of the request was taken).
func BatchReply(err error) *bw.BatchWriteResponse {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return nil
	}
	want := string((&bw.BatchWriteResponse{}).ProtoReflect().Descriptor().FullName())
	for _, d := range ce.Details() {
		if d.Type() != want {
			continue
		}
		var reply bw.BatchWriteResponse
		if proto.Unmarshal(d.Bytes(), &reply) == nil {
			return &reply
		}
	}
	return nil
}

// delay is how long to wait before resend number attempt (0, 1, …) after err.
func (r Retry) delay(err error, attempt int) time.Duration {
	if d, ok := RetryAfter(err); ok {
		return d
	}
	d := r.Backoff
	for i := 0; i < attempt && d < r.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, r.MaxBackoff)
}

// do calls call until it succeeds, fails for good, or the policy gives up.
func (r Retry) do(ctx context.Context, call func() error) error {
	start := time.Now()
	for attempt := 0; ; attempt++ {
		err := call()
		if err == nil || !Retryable(err) {
			return err
		}
		if connect.CodeOf(err) != connect.CodeResourceExhausted && time.Since(start) >= r.For {
			return fmt.Errorf("still unavailable after %s: %w", r.For, err)
		}
		d := r.delay(err, attempt)
		if r.OnWait != nil {
			r.OnWait(err, d)
		}
		if serr := r.wait(ctx, d); serr != nil {
			return errors.Join(serr, err)
		}
	}
}

func (r Retry) wait(ctx context.Context, d time.Duration) error {
	if r.sleep != nil {
		return r.sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
