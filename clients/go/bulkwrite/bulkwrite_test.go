package bulkwrite

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	bw "github.com/bulkwrite/bulkwrite/clients/go/bulkwritev1"
)

func pins(first, n int) []*bw.Op {
	ops := make([]*bw.Op, n)
	for i := range ops {
		ops[i] = Create("pin", uint64(first+i), "42", Set("owner_id", 42))
	}
	return ops
}

func TestPartsCutsTheStreamAndMarksTheLast(t *testing.T) {
	for _, tc := range []struct {
		n, size int
		want    []int
	}{
		{10, 3, []int{3, 3, 3, 1}},
		{9, 3, []int{3, 3, 3}},
		{1, 1000, []int{1}},
		{1000, 1000, []int{1000}},
	} {
		var got []int
		var lasts []bool
		for p, err := range parts(Slice(pins(1, tc.n)), tc.size) {
			if err != nil {
				t.Fatalf("%d ops: %v", tc.n, err)
			}
			if int(p.n) != len(got) {
				t.Errorf("%d ops: part numbered %d, want %d", tc.n, p.n, len(got))
			}
			got, lasts = append(got, len(p.ops)), append(lasts, p.last)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%d ops in parts of %d: %v, want %v", tc.n, tc.size, got, tc.want)
		}
		for i, l := range lasts {
			if l != (i == len(lasts)-1) {
				t.Errorf("%d ops in parts of %d: part %d last=%v", tc.n, tc.size, i, l)
			}
		}
	}
}

func TestPartsOfNothingOrABrokenStream(t *testing.T) {
	for _, err := range parts(Slice(nil), 10) {
		if err == nil || !strings.Contains(err.Error(), "no ops") {
			t.Errorf("an empty stream: %v, want an error saying it has no ops", err)
		}
	}
	broken := func(yield func(*bw.Op, error) bool) {
		for _, op := range pins(1, 5) {
			if !yield(op, nil) {
				return
			}
		}
		yield(nil, errors.New("line 6: bad"))
	}
	var sizes []int
	var last error
	for p, err := range parts(broken, 2) {
		if err != nil {
			last = err
			break
		}
		sizes = append(sizes, len(p.ops))
	}
	if !slices.Equal(sizes, []int{2, 2}) || last == nil || last.Error() != "line 6: bad" {
		t.Errorf("a stream failing after 5 ops in parts of 2: parts %v then %v; want [2 2] then line 6's error", sizes, last)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"3", 3 * time.Second, true},
		{" 0 ", 0, true},
		{"120", 2 * time.Minute, true},
		{"Mon, 07 Dec 2026 03:00:05 GMT", 5 * time.Second, true},
		{"Mon, 07 Dec 2026 02:59:00 GMT", 0, true}, // past: at once
		{"", 0, false},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
	} {
		got, ok := parseRetryAfter(tc.v, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Retry-After %q: %v %v, want %v %v", tc.v, got, ok, tc.want, tc.ok)
		}
	}
}

func TestDelayTakesRetryAfterElseBacksOff(t *testing.T) {
	r := DefaultRetry
	plain := connect.NewError(connect.CodeUnavailable, errors.New("kafka"))
	var got []time.Duration
	for a := range 7 {
		got = append(got, r.delay(plain, a))
	}
	want := []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond,
		1600 * time.Millisecond, 3200 * time.Millisecond, 5 * time.Second, 5 * time.Second}
	if !slices.Equal(got, want) {
		t.Errorf("backoff without Retry-After: %v, want %v", got, want)
	}
	told := connect.NewError(connect.CodeResourceExhausted, errors.New("backlog"))
	told.Meta().Set("Retry-After", "7")
	if d := r.delay(told, 3); d != 7*time.Second {
		t.Errorf("with Retry-After: 7 the wait is %v", d)
	}
	if !Retryable(told) || !Retryable(plain) || Retryable(connect.NewError(connect.CodeAborted, errors.New("x"))) ||
		Retryable(errors.New("x")) {
		t.Error("only resource_exhausted and unavailable are retryable")
	}
}

func TestBatchReplyFromTheErrorsDetail(t *testing.T) {
	want := &bw.BatchWriteResponse{JobId: fakeJobID, Accepted: 3,
		Rejected: []*bw.OpRejection{{Index: 3, Reason: "backlog full", Retryable: true}}}
	err := connect.NewError(connect.CodeResourceExhausted, errors.New("backlog"))
	d, derr := connect.NewErrorDetail(want)
	if derr != nil {
		t.Fatal(derr)
	}
	err.AddDetail(d)
	got := BatchReply(fmt.Errorf("wrapped: %w", err))
	if got == nil || got.Accepted != 3 || len(got.Rejected) != 1 || !got.Rejected[0].Retryable || got.JobId != fakeJobID {
		t.Errorf("BatchReply: %v", got)
	}
	if BatchReply(connect.NewError(connect.CodeUnavailable, errors.New("settings"))) != nil {
		t.Error("an error without the detail has no reply")
	}
}

func TestJSONLinesReadsTheAPIsEncoding(t *testing.T) {
	in := `{"op": "create", "object_type": "pin", "id": 211174952009729, "shard_key": "211106232533034", "fields": {"owner_id": 211106232533034, "title": "Lake at dawn", "image": {"base64": "iVBORw0KGgo="}}}

{"op": "UPDATE", "object_type": "pin", "id": "211174952009729", "fields": {"like_count": {"increment": 1}, "description": null}}
{"op": "create", "object_type": "board", "shard_key": "acme", "fields": {"partner": "acme", "score": 4.5, "archived": false}}
{"op": "delete", "object_type": "pin", "id": 211174952009730}
`
	var ops []*bw.Op
	for op, err := range JSONLines(strings.NewReader(in)) {
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, op)
	}
	if len(ops) != 4 {
		t.Fatalf("%d ops, want 4", len(ops))
	}
	c := ops[0]
	if c.Op != bw.OpType_CREATE || c.Id != 211174952009729 || c.ShardKey != "211106232533034" || len(c.Fields) != 3 {
		t.Errorf("create: %v", c)
	}
	// fields in name order: image, owner_id, title
	if string(c.Fields[0].Value.GetBytesValue()) != "\x89PNG\r\n\x1a\n" || c.Fields[1].Value.GetIntValue() != 211106232533034 ||
		string(c.Fields[2].Value.GetStringValue()) != "Lake at dawn" {
		t.Errorf("create's fields: %v", c.Fields)
	}
	u := ops[1]
	if u.Op != bw.OpType_UPDATE || u.Id != 211174952009729 || !u.Fields[0].Value.GetNullValue() ||
		u.Fields[1].Name != "like_count" || !u.Fields[1].Increment || u.Fields[1].Value.GetIntValue() != 1 {
		t.Errorf("update: %v", u)
	}
	b := ops[2]
	if _, isBool := b.Fields[0].Value.GetKind().(*bw.Value_BoolValue); b.Id != 0 || !isBool ||
		b.Fields[0].Value.GetBoolValue() || b.Fields[2].Value.GetDoubleValue() != 4.5 {
		t.Errorf("board create: %v", b)
	}
	if ops[3].Op != bw.OpType_DELETE || ops[3].Id != 211174952009730 {
		t.Errorf("delete: %v", ops[3])
	}
	for _, bad := range []string{`{"op":"create","object_type":"pin","extra":1}`, `{"op":"drop","object_type":"pin"}`,
		`{"op":"delete","object_type":"pin","id":-1}`, `{"op":"update","id":1,"fields":{"x":[1]}}`,
		`{"op":"update","id":1,"fields":{"x":9223372036854775808}}`} {
		n := 0
		for _, err := range JSONLines(strings.NewReader("{\"op\":\"delete\",\"object_type\":\"pin\",\"id\":1}\n" + bad)) {
			n++
			if n == 2 && (err == nil || !strings.HasPrefix(err.Error(), "line 2: ")) {
				t.Errorf("%s: %v, want an error naming line 2", bad, err)
			}
		}
		if n != 2 {
			t.Errorf("%s: %d items, want the good op and then the error", bad, n)
		}
	}
}

func TestFlightKeepsEachObjectsOrder(t *testing.T) {
	f := flight{objects: map[uint32]map[object]struct{}{}}
	a := part{n: 1, ops: []*bw.Op{Create("pin", 10, "42"), Create("pin", 11, "42")}}
	b := part{n: 2, ops: []*bw.Op{Update("pin", 11, Incr("like_count", 1))}}
	c := part{n: 3, ops: []*bw.Op{Update("board", 11), Create("pin", 0, "42")}} // board 11 is not pin 11; no id: no object
	last := part{n: 4, ops: []*bw.Op{Delete("pin", 99)}, last: true}
	if !f.clear(a, objectsOf(a), 4) {
		t.Error("nothing in flight: a part goes")
	}
	f.objects[a.n] = objectsOf(a)
	if f.clear(b, objectsOf(b), 4) {
		t.Error("pin 11 is in flight in part 1: part 2 must wait")
	}
	if !f.clear(c, objectsOf(c), 4) {
		t.Error("part 3 shares no object with part 1: it goes")
	}
	if f.clear(c, objectsOf(c), 1) {
		t.Error("one in flight at most: part 3 waits")
	}
	if f.clear(last, objectsOf(last), 4) {
		t.Error("the last part waits for every other part")
	}
	delete(f.objects, a.n)
	if !f.clear(b, objectsOf(b), 4) || !f.clear(last, objectsOf(last), 4) {
		t.Error("part 1 answered: parts 2 and the last go")
	}
}

// recordSleeps makes the client's waits instant and remembers them.
func recordSleeps(c *Client) *[]time.Duration {
	var mu sync.Mutex
	var slept []time.Duration
	c.retry.sleep = func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		slept = append(slept, d)
		mu.Unlock()
		return ctx.Err()
	}
	return &slept
}

func codecs(t *testing.T, run func(t *testing.T, opts ...Option)) {
	t.Run("proto", func(t *testing.T) { run(t) })
	t.Run("json", func(t *testing.T) { run(t, WithJSON()) })
}

func TestSendJobResumesWithoutSendingAPartTwice(t *testing.T) {
	codecs(t, func(t *testing.T, opts ...Option) {
		f := newFake()
		url := f.start(t)
		ops := pins(1, 95) // 10 parts of 10, the last of 5
		ctx, crash := context.WithCancel(context.Background())
		c := New(url, opts...)
		res, err := c.SendJob(ctx, "feed", Slice(ops), JobOptions{PartSize: 10, OnPart: func(p PartResult) {
			if p.Part == 4 {
				crash() // the process dies once part 4 is answered
			}
		}})
		if err == nil || res.Sent != 5 {
			t.Fatalf("first run: sent %d parts, err %v; want 5 and the context's error", res.Sent, err)
		}
		res, err = New(url, opts...).SendJob(context.Background(), "feed", Slice(ops), JobOptions{PartSize: 10})
		if err != nil {
			t.Fatal(err)
		}
		if res.JobID != fakeJobID || res.Parts != 10 || res.Sent != 6 || res.Accepted != 55 {
			t.Errorf("resumed: %+v; want parts 0 and 5-9 sent (55 ops)", res)
		}
		for p := uint32(0); p < 10; p++ {
			want := 1
			if p == 0 {
				want = 2 // sent again on resume: answered from the record
			}
			if f.sends[p] != want {
				t.Errorf("part %d sent %d times, want %d", p, f.sends[p], want)
			}
		}
		if !slices.Equal(f.taken, []uint32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) || !f.sealed || f.last != 9 {
			t.Errorf("parts taken %v, sealed %v at %d", f.taken, f.sealed, f.last)
		}
	})
}

func TestSendJobWaitsRetryAfterAndResendsTheSamePart(t *testing.T) {
	codecs(t, func(t *testing.T, opts ...Option) {
		f := newFake()
		f.busy[2] = 2
		url := f.start(t)
		var heard []string
		var mu sync.Mutex
		r := DefaultRetry
		r.OnWait = func(err error, d time.Duration) {
			mu.Lock()
			heard = append(heard, fmt.Sprintf("%s %v", d, connect.CodeOf(err)))
			mu.Unlock()
		}
		c := New(url, append(opts, WithRetry(r))...)
		slept := recordSleeps(c)
		var resends []int
		res, err := c.SendJob(context.Background(), "feed", Slice(pins(1, 40)), JobOptions{PartSize: 10,
			OnPart: func(p PartResult) { resends = append(resends, p.Resends) }})
		if err != nil {
			t.Fatal(err)
		}
		// the fake refuses a resent part with another body (aborted): none was refused
		if res.Accepted != 40 || f.sends[2] != 3 || !slices.Equal(resends, []int{0, 0, 2, 0}) {
			t.Errorf("accepted %d, part 2 sent %d times, resends per part %v", res.Accepted, f.sends[2], resends)
		}
		if !slices.Equal(*slept, []time.Duration{2 * time.Second, 2 * time.Second}) {
			t.Errorf("waits %v, want the Retry-After of 2 s twice", *slept)
		}
		if !slices.Equal(heard, []string{"2s resource_exhausted", "2s resource_exhausted"}) {
			t.Errorf("OnWait heard %q", heard)
		}
	})
}

func TestSendJobReportsRejectedOps(t *testing.T) {
	f := newFake()
	url := f.start(t)
	ops := pins(1, 6)
	ops[1].Fields = append(ops[1].Fields, Set("title", "far too long"))
	for _, op := range ops[3:] { // part 1: every op refused (invalid_argument with the reply)
		op.Fields = append(op.Fields, Set("title", "far too long"))
	}
	res, err := New(url).SendJob(context.Background(), "feed", Slice(ops), JobOptions{PartSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range res.Rejected {
		got = append(got, fmt.Sprintf("%d/%d %d", r.Part, r.Index, r.Op.Id))
	}
	if res.Accepted != 2 || !slices.Equal(got, []string{"0/1 2", "1/0 4", "1/1 5", "1/2 6"}) {
		t.Errorf("accepted %d, rejected %v", res.Accepted, got)
	}
}

func TestSendJobInFlightKeepsObjectOrder(t *testing.T) {
	f := newFake()
	f.delay = 20 * time.Millisecond
	url := f.start(t)
	// 15 times: a part of 10 creates, then a part of increments of the same 10 pins
	var ops []*bw.Op
	for j := range 15 {
		ops = append(ops, pins(10*j+1, 10)...)
		for i := range 10 {
			ops = append(ops, Update("pin", uint64(10*j+1+i), Incr("like_count", 1)))
		}
	}
	res, err := New(url).SendJob(context.Background(), "feed", Slice(ops), JobOptions{PartSize: 10, InFlight: 4})
	if err != nil || res.Accepted != 300 {
		t.Fatalf("accepted %d, %v", res.Accepted, err)
	}
	if len(f.overlaps) > 0 || f.lastEarly || f.maxFlight < 2 || f.maxFlight > 4 {
		t.Errorf("overlaps %v, last part early %v, at most %d in flight (want 2 to 4)", f.overlaps, f.lastEarly, f.maxFlight)
	}
}

func TestSendJobStopsOnARefusedPart(t *testing.T) {
	f := newFake()
	f.cancelled = true
	url := f.start(t)
	_, err := New(url).SendJob(context.Background(), "feed", Slice(pins(1, 5)), JobOptions{})
	if connect.CodeOf(err) != connect.CodeAborted || !strings.Contains(err.Error(), "part 0") {
		t.Errorf("a cancelled job's part: %v, want aborted naming part 0", err)
	}
}

func TestFailuresPagesThroughTheCursor(t *testing.T) {
	f := newFake()
	url := f.start(t)
	var got []uint32
	for x, err := range New(url, WithJSON()).Failures(context.Background(), fakeJobID, FailureFilter{PageSize: 3}) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, x.OpIndex)
	}
	if !slices.Equal(got, []uint32{0, 1, 2, 3, 4, 5, 6}) {
		t.Errorf("failures %v, want 0-6 once each", got)
	}
}

func TestTokenAndCancel(t *testing.T) {
	var auth string
	f := newFake()
	url := f.start(t)
	c := New(url, WithToken("s3cret"), WithHTTPClient(&http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
		auth = r.Header.Get("Authorization")
		return http.DefaultTransport.RoundTrip(r)
	})}))
	st, err := c.Cancel(context.Background(), fakeJobID, "wrong list")
	if err != nil || st.CancelReason != "wrong list" || !f.cancelled || auth != "Bearer s3cret" {
		t.Errorf("cancel: %v %v, Authorization %q", st, err, auth)
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestWaitsSaysWhyShardsWait(t *testing.T) {
	st := &bw.JobStatus{Shards: []*bw.JobShard{
		{Shard: 1},
		{Shard: 3, Waits: &bw.ShardWait{Kind: bw.WaitKind_WAIT_KIND_PAUSED, Detail: "shard 3 is paused by alice: reindex"}},
		{Shard: 5, Waits: &bw.ShardWait{Kind: bw.WaitKind_WAIT_KIND_BACKLOG_FULL}},
	}}
	got := Waits(st)
	want := []string{"shard 3 is paused by alice: reindex", "shard 5: WAIT_KIND_BACKLOG_FULL"}
	if !slices.Equal(got, want) {
		t.Errorf("Waits: %q, want %q", got, want)
	}
}
