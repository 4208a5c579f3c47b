// Command bwgo is a small CLI on the bulkwrite Go client: an example to copy, and the
// program test/tiers/client-go.sh drives against a real stack.
//
//	bwgo [-url URL] [-json] [-token-file F] send -job NAME [-part-size N] [-in-flight K] [-lane L] FILE
//	bwgo ... follow [-interval D] [-timeout D] JOB_ID
//	bwgo ... cancel [-reason R] JOB_ID
//	bwgo ... failures [-page-size N] [-code C] [-reason R] JOB_ID
//	bwgo ... raw -request-id RID FILE
//
// send prints the job's id on stdout as soon as part 0 is answered, a summary and each
// rejected op on stderr, and exits 1 if any op was rejected. follow, cancel and raw print a
// JobStatus as JSON (the proto's field names), failures one JSON line per failure. raw
// calls the generated client (bulkwritev1connect) alone: WriteBatch of FILE's ops as one
// request, then GetJob until finished. BW_TOKEN is the token when -token-file is not given.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/bulkwrite/bulkwrite/clients/go/bulkwrite"
	bw "github.com/bulkwrite/bulkwrite/clients/go/bulkwritev1"
	"github.com/bulkwrite/bulkwrite/clients/go/bulkwritev1/bulkwritev1connect"
)

var (
	url       = flag.String("url", "http://127.0.0.1:18080", "the proxy's data port")
	useJSON   = flag.Bool("json", false, "application/json instead of application/proto")
	tokenFile = flag.String("token-file", "", "a file holding the bearer token (else $BW_TOKEN)")
)

func main() {
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: bwgo [-url URL] [-json] [-token-file F] send|follow|cancel|failures|raw ...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() < 1 {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	token := os.Getenv("BW_TOKEN")
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			fail(2, err)
		}
		token = strings.TrimSpace(string(b))
	}
	retry := bulkwrite.DefaultRetry
	retry.OnWait = func(err error, d time.Duration) {
		_, told := bulkwrite.RetryAfter(err)
		fmt.Fprintf(os.Stderr, "waiting %s (Retry-After: %v): %v\n", d, told, err)
	}
	opts := []bulkwrite.Option{bulkwrite.WithToken(token), bulkwrite.WithRetry(retry)}
	if *useJSON {
		opts = append(opts, bulkwrite.WithJSON())
	}
	c := bulkwrite.New(*url, opts...)
	cmd, args := flag.Arg(0), flag.Args()[1:]
	switch cmd {
	case "send":
		os.Exit(send(ctx, c, args))
	case "follow":
		os.Exit(follow(ctx, c, args))
	case "cancel":
		fs := flag.NewFlagSet("cancel", flag.ExitOnError)
		reason := fs.String("reason", "", "why (shown in the job's status)")
		id := oneArg(fs, args, "JOB_ID")
		st, err := c.Cancel(ctx, id, *reason)
		if err != nil {
			fail(1, err)
		}
		printJSON(st)
	case "failures":
		fs := flag.NewFlagSet("failures", flag.ExitOnError)
		size := fs.Uint("page-size", 100, "failures per page")
		code := fs.Uint("code", 0, "only this MySQL error number")
		reason := fs.String("reason", "", "only failures whose reason contains this")
		id := oneArg(fs, args, "JOB_ID")
		for x, err := range c.Failures(ctx, id, bulkwrite.FailureFilter{PageSize: uint32(*size), Code: uint32(*code), Reason: *reason}) {
			if err != nil {
				fail(1, err)
			}
			printJSON(x)
		}
	case "raw":
		os.Exit(raw(ctx, token, args))
	default:
		flag.Usage()
		os.Exit(2)
	}
}

func send(ctx context.Context, c *bulkwrite.Client, args []string) int {
	fs := flag.NewFlagSet("send", flag.ExitOnError)
	job := fs.String("job", "", "the job's name (required): the same name resumes it")
	size := fs.Int("part-size", 1000, "ops per part")
	inFlight := fs.Int("in-flight", 1, "parts on their way at once (objects keep their order)")
	lane := fs.String("lane", "", "the priority lane")
	path := oneArg(fs, args, "FILE")
	if *job == "" {
		fail(2, fmt.Errorf("send: -job NAME is required"))
	}
	f, err := os.Open(path)
	if err != nil {
		fail(2, err)
	}
	defer f.Close()
	printed := false
	res, err := c.SendJob(ctx, *job, bulkwrite.JSONLines(f), bulkwrite.JobOptions{PartSize: *size, InFlight: *inFlight, Lane: *lane,
		OnPart: func(p bulkwrite.PartResult) {
			if !printed && p.JobID != "" {
				fmt.Println(p.JobID) // at once: a caller may follow the job while it is sent
				printed = true
			}
			if p.Resends > 0 {
				fmt.Fprintf(os.Stderr, "part %d: taken after %d resends\n", p.Part, p.Resends)
			}
		}})
	for _, r := range res.Rejected {
		fmt.Fprintf(os.Stderr, "rejected: part %d op %d (id %d): %s\n", r.Part, r.Index, r.Op.GetId(), r.Reason)
	}
	fmt.Fprintf(os.Stderr, "job %s (%q): %d parts, %d sent, %d skipped, %d accepted, %d rejected\n",
		res.JobID, *job, res.Parts, res.Sent, res.Parts-res.Sent, res.Accepted, len(res.Rejected))
	if err != nil {
		fail(1, err)
	}
	if len(res.Rejected) > 0 {
		return 1
	}
	return 0
}

// follow exits 0 when the job finished with every op applied, 1 otherwise.
func follow(ctx context.Context, c *bulkwrite.Client, args []string) int {
	fs := flag.NewFlagSet("follow", flag.ExitOnError)
	interval := fs.Duration("interval", time.Second, "between two looks")
	timeout := fs.Duration("timeout", 0, "give up after this long (0: never)")
	id := oneArg(fs, args, "JOB_ID")
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	var said []string
	st, err := c.Follow(ctx, id, bulkwrite.FollowOptions{Interval: *interval, OnStatus: func(st *bw.JobStatus) {
		fmt.Fprintf(os.Stderr, "job %s: %d submitted, %d applied, %d failed, %d cancelled, %d pending\n",
			st.JobId, st.Submitted, st.Applied, st.Failed, st.Cancelled, st.Pending)
		if w := bulkwrite.Waits(st); !slices.Equal(w, said) { // a wait said once, not every second
			for _, line := range w {
				fmt.Fprintln(os.Stderr, "  waits: "+line)
			}
			said = w
		}
	}})
	if err != nil {
		fail(1, err)
	}
	printJSON(st)
	if st.Failed > 0 || st.Cancelled > 0 || st.Lost > 0 {
		return 1
	}
	return 0
}

// raw is the generated client with nothing of this module's package around it.
func raw(ctx context.Context, token string, args []string) int {
	fs := flag.NewFlagSet("raw", flag.ExitOnError)
	rid := fs.String("request-id", "", "the request's idempotency key")
	path := oneArg(fs, args, "FILE")
	var copts []connect.ClientOption
	if *useJSON {
		copts = append(copts, connect.WithProtoJSON())
	}
	rpc := bulkwritev1connect.NewBulkwriteServiceClient(http.DefaultClient, *url, copts...)
	f, err := os.Open(path)
	if err != nil {
		fail(2, err)
	}
	req := &bw.BatchWriteRequest{RequestId: *rid}
	for op, err := range bulkwrite.JSONLines(f) {
		if err != nil {
			fail(2, err)
		}
		req.Ops = append(req.Ops, op)
	}
	withToken := func(r connect.AnyRequest) {
		if token != "" {
			r.Header().Set("Authorization", "Bearer "+token)
		}
	}
	wreq := connect.NewRequest(req)
	withToken(wreq)
	res, err := rpc.WriteBatch(ctx, wreq)
	if err != nil {
		fail(1, err)
	}
	fmt.Fprintf(os.Stderr, "job %s: %d accepted, %d rejected\n", res.Msg.JobId, res.Msg.Accepted, len(res.Msg.Rejected))
	for {
		greq := connect.NewRequest(&bw.GetJobRequest{JobId: res.Msg.JobId})
		withToken(greq)
		st, err := rpc.GetJob(ctx, greq)
		if err != nil {
			fail(1, err)
		}
		if st.Msg.Finished {
			printJSON(st.Msg)
			return 0
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func oneArg(fs *flag.FlagSet, args []string, what string) string {
	fs.Parse(args)
	if fs.NArg() != 1 {
		fail(2, fmt.Errorf("%s: one %s expected", fs.Name(), what))
	}
	return fs.Arg(0)
}

func printJSON(m proto.Message) {
	b, err := protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		fail(1, err)
	}
	var line bytes.Buffer // protojson spaces at random; one line for jq and grep
	if err := json.Compact(&line, b); err != nil {
		fail(1, err)
	}
	fmt.Println(line.String())
}

func fail(code int, err error) {
	fmt.Fprintln(os.Stderr, "bwgo:", err)
	os.Exit(code)
}
