// Package bulkwrite is bulkwrite's Go client: the generated Connect client
// (bulkwritev1connect) plus what every team sending bulk work needs on top of it —
// a file or a stream of ops sent as one named job in parts, resumed after a crash,
// resent after 429 and 503 as the proxy's Retry-After says, followed until finished,
// cancelled, and its failures read page by page. README.md shows each in a few lines.
package bulkwrite

import (
	"context"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	bw "github.com/bulkwrite/bulkwrite/clients/go/bulkwritev1"
	"github.com/bulkwrite/bulkwrite/clients/go/bulkwritev1/bulkwritev1connect"
)

// Client calls one proxy (or a balancer in front of many). It is safe for concurrent use.
type Client struct {
	rpc   bulkwritev1connect.BulkwriteServiceClient
	retry Retry
}

type settings struct {
	http  connect.HTTPClient
	token string
	json  bool
	extra []connect.ClientOption
	retry Retry
}

// Option configures New.
type Option func(*settings)

// WithHTTPClient sets the HTTP client (timeouts, TLS, client certificates); the default
// is http.DefaultClient.
func WithHTTPClient(c connect.HTTPClient) Option { return func(s *settings) { s.http = c } }

// WithToken sends "Authorization: Bearer TOKEN" on every call (docs/security.md).
func WithToken(token string) Option { return func(s *settings) { s.token = token } }

// WithJSON sends and reads application/json (the proto3 JSON mapping) instead of
// application/proto (connect.WithProtoJSON). The proxy packs a JSON request into protobuf
// before it compares a resent part with the part it took, so a part sent as JSON and
// resent as protobuf (or the other way round) is still the same part.
func WithJSON() Option { return func(s *settings) { s.json = true } }

// WithClientOptions passes options on to the generated client (interceptors, gzip, …).
func WithClientOptions(opts ...connect.ClientOption) Option {
	return func(s *settings) { s.extra = append(s.extra, opts...) }
}

// WithRetry replaces the default resend policy (DefaultRetry).
func WithRetry(r Retry) Option { return func(s *settings) { s.retry = r } }

// New returns a client of the proxy at baseURL ("http://127.0.0.1:18080": the data port,
// the one of /v1/batches).
func New(baseURL string, opts ...Option) *Client {
	s := settings{http: http.DefaultClient, retry: DefaultRetry}
	for _, o := range opts {
		o(&s)
	}
	var copts []connect.ClientOption
	if s.json {
		copts = append(copts, connect.WithProtoJSON())
	}
	if s.token != "" {
		copts = append(copts, connect.WithInterceptors(bearer(s.token)))
	}
	copts = append(copts, s.extra...)
	return &Client{
		rpc:   bulkwritev1connect.NewBulkwriteServiceClient(s.http, strings.TrimRight(baseURL, "/"), copts...),
		retry: s.retry,
	}
}

// RPC is the generated client underneath, for calls this package does not wrap.
func (c *Client) RPC() bulkwritev1connect.BulkwriteServiceClient { return c.rpc }

func bearer(token string) connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("Authorization", "Bearer "+token)
			return next(ctx, req)
		}
	}
}

// GetJob returns a job's status, asking again while the proxy answers 503 (a job record
// it cannot read at that moment) within the retry policy.
func (c *Client) GetJob(ctx context.Context, jobID string) (*bw.JobStatus, error) {
	return call(ctx, c.retry, c.rpc.GetJob, &bw.GetJobRequest{JobId: jobID})
}

// Cancel cancels a job: the ops its shards have not applied are skipped (counted in
// the status's cancelled once each shard has passed them); applied ops stay applied.
func (c *Client) Cancel(ctx context.Context, jobID, reason string) (*bw.JobStatus, error) {
	return call(ctx, c.retry, c.rpc.CancelJob, &bw.CancelJobRequest{JobId: jobID, Reason: reason})
}

// call makes one unary call of the generated client, resent as the retry policy says.
func call[Req, Res any](ctx context.Context, r Retry,
	fn func(context.Context, *connect.Request[Req]) (*connect.Response[Res], error), msg *Req) (*Res, error) {
	var out *Res
	err := r.do(ctx, func() error {
		res, err := fn(ctx, connect.NewRequest(msg))
		if err == nil {
			out = res.Msg
		}
		return err
	})
	return out, err
}
