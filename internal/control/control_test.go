package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/cep"
	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/internal/control/cepheusv1"
	"github.com/cepheus-cep/cepheus/rules"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/proto"
)

const testRules = `
ruleset c
event time ts

rule big_then_foreign {
  severity high
  key card
  pattern {
    begin big where type == "auth" && amount > 100
    followedBy foreign where country != big.country
    within 10m
  }
}
`

func events(from, n int) string {
	var b strings.Builder
	base := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	for i := from; i < from+n; i++ {
		country := "US"
		if i%2 == 1 {
			country = "FR"
		}
		fmt.Fprintf(&b, `{"ts":%q,"card":"c%d","type":"auth","amount":500,"country":%q}`+"\n",
			base.Add(time.Duration(i)*time.Minute).Format(time.RFC3339), i/2, country)
	}
	return b.String()
}

// TestClientMessage: a call's error reads as the server's message, and a
// call to an address where nothing listens says that no server answers
// there, without gRPC's wrapping.
func TestClientMessage(t *testing.T) {
	var refusedMu sync.Mutex
	var refused []string
	srv, err := Serve("127.0.0.1:0", cep.NewStreamMonitor(), Options{Refused: func(msg string) {
		refusedMu.Lock()
		defer refusedMu.Unlock()
		refused = append(refused, msg)
	}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := Dial(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A monitor without a job: the server's own UNAVAILABLE.
	_, err = c.Deploy(ctx, cep.Deploy{Name: "c.cep", Source: []byte(testRules)})
	want := "no job is running (the engine's run has not begun, or has ended); try again"
	if status.Code(err) != codes.Unavailable || c.Message(err) != want {
		t.Errorf("Deploy without a job: %v, message %q; want UNAVAILABLE and %q", err, c.Message(err), want)
	}
	// A shadow deploy with drop_changed, which would be ignored: refused
	// as a bad request, before anything else.
	_, err = c.c.Deploy(ctx, &cepheusv1.DeployRequest{Name: "c.cep", Source: []byte(testRules), Shadow: true, DropChanged: true})
	if msg := c.Message(err); status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(msg, "drop_changed goes with a deploy of the active version, not with shadow") {
		t.Errorf("Deploy with shadow and drop_changed: %v, message %q; want INVALID_ARGUMENT saying drop_changed does not go with shadow", err, msg)
	}
	// The refusals the server's own log has (serve's WARN lines): the
	// deploy without a job, and one that does not compile, its first
	// problem named. (The bad request above is refused before a deploy.)
	if _, err := c.Deploy(ctx, cep.Deploy{Name: "bad.cep", Source: []byte("ruleset b\nevent time ts\nrule r {\n  pattern {\n    begin a where amount > +\n  }\n}\n")}); err == nil {
		t.Fatal("a deploy that does not compile: no error")
	}
	refusedMu.Lock()
	got := slices.Clone(refused)
	refusedMu.Unlock()
	if len(got) != 2 || !strings.HasPrefix(got[0], "deploy of c.cep refused: ") ||
		!strings.HasPrefix(got[1], "deploy of bad.cep refused: 1 problem, the first: bad.cep:5:") {
		t.Errorf("the refusals told: %q; want the deploy without a job's, then bad.cep's with its first problem", got)
	}
	addr := srv.Addr()
	srv.Close()
	gone, err := Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer gone.Close()
	_, err = gone.Status(ctx)
	msg := gone.Message(err)
	if status.Code(err) != codes.Unavailable || !strings.HasPrefix(msg, "no cepheus serve answers there (dial tcp "+addr+": connect: connection refused)") ||
		strings.Contains(msg, "rpc error") {
		t.Errorf("Status of %s where nothing listens: %v, message %q; want that no server answers there, and why", addr, err, msg)
	}
	// A Unix socket of another user's (mode 0600): not "no serve answers
	// there", as it said.
	denied := status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial unix /run/cepheus.sock: connect: permission denied"`)
	if msg, want := gone.Message(denied), "cepheus serve's socket refused the connection (dial unix /run/cepheus.sock: connect: permission denied): only serve's user (and root) may connect to it; run this as that user"; msg != want {
		t.Errorf("a socket's permission denied: message %q, want %q", msg, want)
	}
	// An HTTP/1.1 server (serve's -http port, given for its -grpc one):
	// said, not gRPC's "frame too large". A real one answers the dial.
	web := &http.Server{Handler: http.NotFoundHandler()}
	wl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go web.Serve(wl)
	defer web.Close()
	webc, err := Dial(wl.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer webc.Close()
	_, err = webc.Status(ctx)
	if msg := webc.Message(err); !strings.HasPrefix(msg, "an HTTP server answers there, not cepheus serve's control API (") ||
		!strings.HasSuffix(msg, "): is it serve's -http port? Give its -grpc address with -server") {
		t.Errorf("Status of an HTTP/1.1 server: %v, message %q; want that an HTTP server answers there", err, msg)
	}
	// The server's own UNAVAILABLE, come as it stopped (the connection
	// no longer ready), is its message.
	if msg := gone.Message(status.Error(codes.Unavailable, want)); msg != want {
		t.Errorf("the server's UNAVAILABLE over a connection that is not ready: message %q, want %q", msg, want)
	}
}

// blockingDeploy is a Control service whose Deploy waits until its
// server stops: a server that dies during the call.
type blockingDeploy struct {
	cepheusv1.UnimplementedControlServer
	called chan struct{}
	once   sync.Once
}

func (b *blockingDeploy) Deploy(ctx context.Context, _ *cepheusv1.DeployRequest) (*cepheusv1.DeployResponse, error) {
	b.once.Do(func() { close(b.called) })
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestClientMessageLost: a call whose server goes away while it is in
// flight is said to be lost, and what the server did is not known; it
// read "error reading from server: EOF", which named neither. The
// server's own UNAVAILABLE (no job) is not lost.
func TestClientMessageLost(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	svc := &blockingDeploy{called: make(chan struct{})}
	cepheusv1.RegisterControlServer(srv, svc)
	go srv.Serve(ln)
	defer srv.Stop()
	c, err := Dial(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		<-svc.called
		srv.Stop() // closes the connection under the call
	}()
	_, err = c.Deploy(ctx, cep.Deploy{Name: "c.cep", Source: []byte(testRules)})
	msg := c.Message(err)
	if status.Code(err) != codes.Unavailable || !c.Lost(err) ||
		!strings.HasPrefix(msg, "the connection to cepheus serve was lost during the call (") || !strings.HasSuffix(msg, "): did it stop or crash? Its log says") {
		t.Errorf("Deploy whose server stopped during the call: %v, lost %v, message %q; want UNAVAILABLE, lost, and a message saying so", err, c.Lost(err), msg)
	}
	for _, own := range []string{noJobCheckpoint, noJob + " (the engine's run has not begun, or has ended); try again"} {
		if err := status.Error(codes.Unavailable, own); c.Lost(err) || c.Message(err) != own {
			t.Errorf("the server's own UNAVAILABLE %q: lost %v, message %q; want not lost, its message", own, c.Lost(err), c.Message(err))
		}
	}
	if err := status.Error(codes.FailedPrecondition, "no previous version"); c.Lost(err) {
		t.Errorf("FAILED_PRECONDITION: lost")
	}
}

// TestClientMessageUnanswered: a call that ends before the server
// answers (its deadline, the CLI's 30 s, or an interrupt) is said to be
// unanswered, and its message says so: a deploy handed to the job goes
// on without its caller, so whether it switched is not known. It read
// gRPC's words alone: "context deadline exceeded", "context canceled" or
// "stream terminated by RST_STREAM with error code: CANCEL".
func TestClientMessageUnanswered(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	cepheusv1.RegisterControlServer(srv, &blockingDeploy{called: make(chan struct{})})
	go srv.Serve(ln)
	defer srv.Stop()
	c, err := Dial(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = c.Deploy(ctx, cep.Deploy{Name: "c.cep", Source: []byte(testRules)})
	want := "cepheus serve did not answer before the call's deadline"
	if msg := c.Message(err); status.Code(err) != codes.DeadlineExceeded || !c.Unanswered(err) || c.Lost(err) || msg != want {
		t.Errorf("Deploy past its deadline: %v, unanswered %v, lost %v, message %q; want DEADLINE_EXCEEDED, unanswered, %q", err, c.Unanswered(err), c.Lost(err), msg, want)
	}
	cctx, ccancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(100 * time.Millisecond)
		ccancel()
	}()
	_, err = c.Deploy(cctx, cep.Deploy{Name: "c.cep", Source: []byte(testRules)})
	want = "the call was cancelled before cepheus serve answered"
	if msg := c.Message(err); !c.Unanswered(err) || msg != want {
		t.Errorf("Deploy cancelled: %v, unanswered %v, message %q; want unanswered, %q", err, c.Unanswered(err), msg, want)
	}
	if err := status.Error(codes.FailedPrecondition, "no previous version"); c.Unanswered(err) {
		t.Errorf("FAILED_PRECONDITION: unanswered")
	}
}

// TestControl serves the control API over a live job: health says
// NOT_SERVING for the Control service until the job reads, then SERVING;
// Status reports the job's figures and rules; TriggerCheckpoint returns a
// checkpoint newer than the latest; Validate returns a good ruleset's
// version and a bad one's problems with their lines and columns;
// reflection lists the services.
// fixture is what the tests of a running job share: an engine over
// testRules (v1), an input of 40 events in dir, a monitor, the control
// server over it and a client of the server (closed when the test ends).
type fixture struct {
	dir, input string
	v1         *rules.Ruleset
	e          *cep.Engine
	m          *cep.StreamMonitor
	srv        *Server
	c          *Client
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{dir: t.TempDir()}
	var err error
	if f.v1, err = rules.Load("c.cep", []byte(testRules)); err != nil {
		t.Fatal(err)
	}
	if f.e, err = cep.New(cep.WithRuleset(f.v1)); err != nil {
		t.Fatal(err)
	}
	f.input = filepath.Join(f.dir, "events.jsonl")
	if err := os.WriteFile(f.input, []byte(events(0, 40)), 0o644); err != nil {
		t.Fatal(err)
	}
	f.m = cep.NewStreamMonitor()
	if f.srv, err = Serve("127.0.0.1:0", f.m); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.srv.Close() })
	if f.c, err = Dial(f.srv.Addr()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.c.Close() })
	return f
}

// dialIdle serves the control API of a monitor that runs no job and
// returns its client; both close at the test's end.
func dialIdle(t *testing.T) *Client {
	t.Helper()
	srv, err := Serve("127.0.0.1:0", cep.NewStreamMonitor())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	c, err := Dial(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestValidateLarge: a ruleset of 5 MiB (long comments), which cepheus
// check and -rules take, is validated through the control API; gRPC's
// default limit of 4 MiB refused it (RESOURCE_EXHAUSTED, received
// message larger than max), so that it could not be deployed either.
func TestValidateLarge(t *testing.T) {
	c := dialIdle(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	src := strings.Repeat("# "+strings.Repeat("padding ", 12)+"\n", 55000) + testRules
	if len(src) < 5<<20 {
		t.Fatalf("the ruleset is %d bytes; want at least 5 MiB", len(src))
	}
	want, err := rules.Load("large.cep", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Validate(ctx, "large.cep", []byte(src))
	if err != nil || !r.GetOk() || r.GetVersion() != want.Hash {
		t.Errorf("Validate of a ruleset of %d bytes: %v, %v; want ok, version %.12s", len(src), r, err, want.Hash)
	}
}

// TestSourceTooLarge: a ruleset over the 64 MiB a request may carry is
// refused by the client before it is sent, saying the limit and the way
// out; it was gRPC's own "trying to send message larger than max
// (68579194 vs. 67108864)" (the rulesets trial). One just under the limit
// is still sent, and the server's answer comes back.
func TestSourceTooLarge(t *testing.T) {
	c := dialIdle(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	big := []byte(strings.Repeat("#", MaxMessage))
	want := "the ruleset's source makes a request of 67108878 bytes, more than the 64 MiB (67108864 bytes) the control API takes"
	if _, err := c.Validate(ctx, "big.cep", big); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Validate of %d bytes: %v; want %q", len(big), err, want)
	}
	if _, err := c.Deploy(ctx, cep.Deploy{Name: "big.cep", Source: big}); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Deploy of %d bytes: %v; want %q", len(big), err, want)
	}
	// Under the limit the request goes: the server answers (it does not
	// compile: no rule).
	r, err := c.Validate(ctx, "almost.cep", big[:MaxMessage-64])
	if err != nil || r.GetOk() {
		t.Errorf("Validate of %d bytes: %v, %v; want the server's answer, not ok", MaxMessage-64, r, err)
	}
}

// abortingServer answers its first deploys, rollbacks and promotes
// ABORTED, as a job whose other switch waits for its checkpoint.
type abortingServer struct {
	cepheusv1.UnimplementedControlServer
	mu    sync.Mutex
	calls int
	busy  int
}

func (s *abortingServer) answer() (*cepheusv1.DeployResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.calls <= s.busy {
		return nil, status.Error(codes.Aborted, "cep: another deploy is switching: try again")
	}
	return &cepheusv1.DeployResponse{Ok: true, Ruleset: "c", Version: "v2"}, nil
}

func (s *abortingServer) Deploy(context.Context, *cepheusv1.DeployRequest) (*cepheusv1.DeployResponse, error) {
	return s.answer()
}

func (s *abortingServer) Rollback(context.Context, *cepheusv1.RollbackRequest) (*cepheusv1.DeployResponse, error) {
	return s.answer()
}

func (s *abortingServer) Promote(context.Context, *cepheusv1.PromoteRequest) (*cepheusv1.DeployResponse, error) {
	return s.answer()
}

// TestClientRetriesAborted: the client's deploy, rollback and promote
// (cepheus rules deploy, rollback, promote) send the call again while the
// server answers ABORTED (another deploy switching: a checkpoint's time),
// until their context ends; cepheus rules deploy failed with "another
// deploy is switching: try again" when two deploys came together.
func TestClientRetriesAborted(t *testing.T) {
	fake := &abortingServer{}
	gs := grpc.NewServer()
	cepheusv1.RegisterControlServer(gs, fake)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(ln)
	defer gs.Stop()
	c, err := Dial(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for name, call := range map[string]func(context.Context) (*cep.DeployResult, error){
		"Deploy": func(ctx context.Context) (*cep.DeployResult, error) {
			return c.Deploy(ctx, cep.Deploy{Source: []byte(testRules)})
		},
		"Rollback": func(ctx context.Context) (*cep.DeployResult, error) { return c.Rollback(ctx, cep.SwitchOptions{}) },
		"Promote":  func(ctx context.Context) (*cep.DeployResult, error) { return c.Promote(ctx, cep.SwitchOptions{}) },
	} {
		fake.mu.Lock()
		fake.calls, fake.busy = 0, 3
		fake.mu.Unlock()
		r, err := call(ctx)
		fake.mu.Lock()
		n := fake.calls
		fake.mu.Unlock()
		if err != nil || r.Version != "v2" || n != 4 {
			t.Errorf("%s answered ABORTED 3 times: %+v, %v after %d calls; want v2 at the 4th", name, r, err, n)
		}
	}
	// A context that ends first gets the last ABORTED.
	fake.mu.Lock()
	fake.calls, fake.busy = 0, 1<<30
	fake.mu.Unlock()
	short, cancelShort := context.WithTimeout(ctx, 350*time.Millisecond)
	defer cancelShort()
	if _, err := c.Deploy(short, cep.Deploy{Source: []byte(testRules)}); status.Code(err) != codes.Aborted && status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("Deploy while ABORTED until its deadline: %v; want ABORTED or DEADLINE_EXCEEDED", err)
	}
}

// TestStatusPartitionsOrdered: Status lists the partitions in one order,
// numbers by value (a topic's partitions, numbered files), not in a map's,
// which changed from one call to the next (cepheus status printed a
// directory's files or a topic's partitions shuffled).
func TestStatusPartitionsOrdered(t *testing.T) {
	wms := map[string]int64{}
	var want []string
	for _, name := range []string{"a.jsonl", "b.jsonl", "day-9.jsonl", "day-010.jsonl", "day-10.jsonl", "day-11.jsonl", "in-0", "in-1", "in-2", "in-10", "in-11", "in.x-3", "z.jsonl"} {
		wms[name] = int64(len(name))
		want = append(want, name)
	}
	for range 20 {
		var got []string
		for _, p := range statusOf(cep.MonitorSnapshot{PartitionWatermarks: wms}).GetPartitions() {
			if p.GetWatermarkUnixMs() != int64(len(p.GetPartition())) {
				t.Errorf("partition %s: watermark %d", p.GetPartition(), p.GetWatermarkUnixMs())
			}
			got = append(got, p.GetPartition())
		}
		if !slices.Equal(got, want) {
			t.Fatalf("partitions %v, want %v", got, want)
		}
	}
}

// TestStatusTimedOut: a rule's count of timed-out partial matches and
// its timeout block's severity go into the status.
func TestStatusTimedOut(t *testing.T) {
	rs := statusOf(cep.MonitorSnapshot{Rules: []cep.RuleCount{
		{Rule: "a", Severity: "high", Alerts: 7, TimedOut: 3, TimeoutSeverity: "low"},
		{Rule: "b", Severity: "medium", Alerts: 2},
	}}).GetRules()
	if len(rs) != 2 || rs[0].GetAlerts() != 7 || rs[0].GetTimedOut() != 3 || rs[0].GetTimeoutSeverity() != "low" ||
		rs[1].GetTimedOut() != 0 || rs[1].GetTimeoutSeverity() != "" {
		t.Errorf("status rules: %v", rs)
	}
}

// TestStatusLookupsAggregates: Status has each lookup's counters and each
// velocity aggregate's figures, in declaration order (it had none: only
// the metrics and the run summary showed them), and StatusLookups and
// StatusAggregates give them back as the monitor had them.
func TestStatusLookupsAggregates(t *testing.T) {
	customer := cep.LookupStats{Name: "customer", Bound: true}
	customer.Hits, customer.Misses, customer.NotFound, customer.Unreadable, customer.Requests = 90, 10, 2, 1, 4
	customer.Failures, customer.Timeouts, customer.Defaulted, customer.Rejected = 3, 1, 5, 6
	customer.LastError = "no answer within 250ms"
	sn := cep.MonitorSnapshot{
		Lookups:    []cep.LookupStats{customer, {Name: "device"}},
		Aggregates: []cep.AggregateStats{{Name: "merchant_cards", Keys: 12, Dropped: 3, HotKeys: 1}, {Name: "card_spend", Keys: 40}},
	}
	st := statusOf(sn)
	want := []*cepheusv1.LookupStatus{
		{Name: "customer", Bound: true, Hits: 90, Misses: 10, NotFound: 2, Unreadable: 1, Requests: 4, Failures: 3, Timeouts: 1,
			Defaulted: 5, Rejected: 6, LastError: "no answer within 250ms"},
		{Name: "device"},
	}
	if got := st.GetLookups(); len(got) != len(want) || !proto.Equal(got[0], want[0]) || !proto.Equal(got[1], want[1]) {
		t.Errorf("status lookups: %v, want %v", got, want)
	}
	wantAggs := []*cepheusv1.AggregateStatus{{Name: "merchant_cards", Keys: 12, Dropped: 3, HotKeys: 1}, {Name: "card_spend", Keys: 40}}
	if got := st.GetAggregates(); len(got) != len(wantAggs) || !proto.Equal(got[0], wantAggs[0]) || !proto.Equal(got[1], wantAggs[1]) {
		t.Errorf("status aggregates: %v, want %v", got, wantAggs)
	}
	if got := StatusLookups(st); !reflect.DeepEqual(got, sn.Lookups) {
		t.Errorf("StatusLookups = %+v, want %+v", got, sn.Lookups)
	}
	if got := StatusAggregates(st); !reflect.DeepEqual(got, sn.Aggregates) {
		t.Errorf("StatusAggregates = %+v, want %+v", got, sn.Aggregates)
	}
}

// TestStatusPartitionIdleLag: a partition of Status says whether it is
// idle, and a Kafka partition its lag (a file's has none).
func TestStatusPartitionIdleLag(t *testing.T) {
	ps := statusOf(cep.MonitorSnapshot{
		PartitionWatermarks: map[string]int64{"in-0": 5, "in-1": 7, "e.jsonl": 9},
		IdlePartitions:      map[string]bool{"in-1": true},
		KafkaLag:            map[string]int64{"in-0": 12, "in-1": 0},
	}).GetPartitions()
	got := map[string]string{}
	for _, p := range ps {
		lag := "none"
		if p.Lag != nil {
			lag = fmt.Sprint(*p.Lag)
		}
		got[p.GetPartition()] = fmt.Sprintf("idle %v, lag %s", p.GetIdle(), lag)
	}
	want := map[string]string{"in-0": "idle false, lag 12", "in-1": "idle true, lag 0", "e.jsonl": "idle false, lag none"}
	if !maps.Equal(got, want) {
		t.Errorf("status partitions %v, want %v", got, want)
	}
}

// TestStatusBeforeAJob: the status of a monitor no job has published to
// yet (serve restoring its checkpoint) has no watermark yet; it had the
// Unix epoch, which cepheus status printed as 1970-01-01T00:00:00.000Z.
func TestStatusBeforeAJob(t *testing.T) {
	st := statusOf(cep.NewStreamMonitor().Snapshot())
	if st.GetReady() || st.GetRuleset() != "" || event.Time(st.GetWatermarkUnixMs()) != event.MinTime || st.GetWatermarkLagMs() != 0 {
		t.Errorf("status before a job: ready %v, ruleset %q, watermark %d, lag %d; want not ready, no ruleset, event.MinTime, 0",
			st.GetReady(), st.GetRuleset(), st.GetWatermarkUnixMs(), st.GetWatermarkLagMs())
	}
}

// TestControlDeployRefused: a version that compiles but that the job
// cannot take (another event time) is FAILED_PRECONDITION with the
// engine's reason, and the engine's refusal of a deploy that meets
// another one's switch (cep.ErrSwitching, given to the mapping: no real
// deploy is made to meet one here) is ABORTED (send it again): both were
// UNKNOWN, gRPC's code for an error that says nothing of itself.
func TestControlDeployRefused(t *testing.T) {
	fx := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	jctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := fx.e.Stream(jctx, cep.StreamConfig{
			Events: fx.input, Follow: true, PollInterval: 10 * time.Millisecond, StateDir: filepath.Join(fx.dir, "state"),
			AlertsDir: filepath.Join(fx.dir, "alerts"), CheckpointInterval: time.Hour, Monitor: fx.m,
		})
		done <- err
	}()
	waitStatus(t, ctx, fx.c, "not ready with 40 records", readyWith40)
	src := []byte(strings.Replace(testRules, "event time ts", "event time at", 1))
	_, err := fx.c.Deploy(ctx, cep.Deploy{Name: "at.cep", Source: src})
	if msg := status.Convert(err).Message(); status.Code(err) != codes.FailedPrecondition ||
		!strings.HasPrefix(msg, "deploy of version ") || !strings.Contains(msg, "its event time is field at, the job's is ts") {
		t.Errorf("Deploy of another event time: %v; want FAILED_PRECONDITION, cep: deploy of version ...: its event time is field at, the job's is ts ...", err)
	}
	if v, err := fx.c.ListVersions(ctx); err != nil || len(v) != 1 || v[0].Version != fx.v1.Hash {
		t.Errorf("the versions after the refused deploy: %v, %v; want %.12s alone", v, err, fx.v1.Hash)
	}
	stop()
	if err := <-done; err != nil && err != context.Canceled {
		t.Fatal(err)
	}
	_, err = deployAnswer(ctx, "c.cep", nil, cep.ErrSwitching)
	if status.Code(err) != codes.Aborted || status.Convert(err).Message() != "another deploy is switching: try again" {
		t.Errorf("the answer of a deploy that met another one's switch: %v; want ABORTED, cep: another deploy is switching: try again", err)
	}
}

func TestControl(t *testing.T) {
	fx := newFixture(t)
	dir, rs, e, input, m, srv, c := fx.dir, fx.v1, fx.e, fx.input, fx.m, fx.srv, fx.c
	conn, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	healthOf := func() healthpb.HealthCheckResponse_ServingStatus {
		r, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: cepheusv1.Control_ServiceDesc.ServiceName})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetStatus()
	}
	if st := healthOf(); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("health before the job: %v, want NOT_SERVING", st)
	}
	jctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := e.Stream(jctx, cep.StreamConfig{
			Events: input, Follow: true, PollInterval: 10 * time.Millisecond, StateDir: filepath.Join(dir, "state"),
			AlertsDir: filepath.Join(dir, "alerts"), CheckpointInterval: time.Hour, Monitor: m,
		})
		done <- err
	}()
	st := waitStatus(t, ctx, c, "not ready with 40 records and serving", func(st *cepheusv1.StatusResponse) bool {
		return readyWith40(st) && healthOf() == healthpb.HealthCheckResponse_SERVING
	})
	if st.GetRuleset() != "c" || st.GetVersion() != rs.Hash || len(st.GetRules()) != 1 || st.GetRules()[0].GetRule() != "big_then_foreign" {
		t.Errorf("status: %v", st)
	}
	// Checkpoints are an hour apart: only the trigger makes one.
	before := st.GetLastCheckpoint()
	id, err := c.TriggerCheckpoint(ctx)
	if err != nil || id <= before {
		t.Fatalf("TriggerCheckpoint: %d, %v; want a checkpoint after %d", id, err, before)
	}
	if _, err := os.Stat(filepath.Join(dir, "state", fmt.Sprintf("chk-%d", id))); err != nil {
		t.Errorf("checkpoint %d is not in the state directory: %v", id, err)
	}
	// Validate.
	good, err := c.Validate(ctx, "c.cep", []byte(testRules))
	if err != nil || !good.GetOk() || good.GetVersion() != rs.Hash || !slices.Equal(good.GetRules(), []string{"big_then_foreign"}) {
		t.Errorf("Validate of the running rules: %v, %v", good, err)
	}
	bad, err := c.Validate(ctx, "bad.cep", []byte(strings.Replace(testRules, `amount > 100`, `amount > "x" +`, 1)))
	if err != nil || bad.GetOk() || len(bad.GetProblems()) == 0 {
		t.Fatalf("Validate of a bad ruleset: %v, %v; want problems", bad, err)
	}
	if p := bad.GetProblems()[0]; p.GetFile() != "bad.cep" || p.GetLine() != 9 || p.GetColumn() == 0 || p.GetMessage() == "" {
		t.Errorf("the problem: %v; want bad.cep line 9 with a column and a message", p)
	}
	// A ruleset with a warning is ok, its warnings in the answer.
	warned, err := c.Validate(ctx, "w.cep", []byte(strings.Replace(testRules, "!= big.country", "!= foreign.country", 1)))
	if err != nil || !warned.GetOk() || len(warned.GetWarnings()) != 1 {
		t.Fatalf("Validate of a ruleset with a warning: %v, %v; want ok and one warning", warned, err)
	}
	if w := warned.GetWarnings()[0]; w.GetFile() != "w.cep" || w.GetLine() != 10 || w.GetColumn() != 41 ||
		!strings.HasPrefix(w.GetMessage(), "warning: stage foreign takes one event") {
		t.Errorf("the warning: %v; want w.cep:10:41, \"warning: stage foreign takes one event...\"", w)
	}
	if len(good.GetWarnings()) != 0 {
		t.Errorf("Validate of the running rules: warnings %v", good.GetWarnings())
	}
	// Reflection lists the services (grpcurl's way in).
	rc, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := rc.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	for _, want := range []string{"cepheus.v1.Control", "grpc.health.v1.Health"} {
		if !slices.Contains(names, want) {
			t.Errorf("reflection lists %v, not %s", names, want)
		}
	}
	stop()
	if err := <-done; err != nil && err != context.Canceled {
		t.Fatal(err)
	}
	// After the end of the run: UNAVAILABLE, saying so and what to do
	// (it named restoring and a rebalance alone, also over a switch).
	_, err = c.TriggerCheckpoint(ctx)
	if msg := c.Message(err); status.Code(err) != codes.Unavailable || !strings.Contains(msg, "the run has ended") ||
		!strings.Contains(msg, "switches to another ruleset version") || !strings.HasSuffix(msg, "try again once cepheus status says ready") {
		t.Errorf("TriggerCheckpoint without a job: %v, message %q; want UNAVAILABLE naming a switch and the end, and what to do", err, msg)
	}
}

// addedRule is a rule testRulesV2 adds to testRules.
const addedRule = `
rule two_big {
  severity low
  key card
  pattern {
    begin first where amount > 400
    followedBy second where amount > 400
    within 5m
  }
}
`

// TestControlDeploy hot-loads rulesets into a live job through the
// client: before the job, a deploy is UNAVAILABLE and a rollback
// FAILED_PRECONDITION; a deploy that adds a rule switches the job to the
// new version (its rule kept, the new one added) and ListVersions shows
// it active, the first one previous; a ruleset that does not compile is
// refused with its problems' lines and columns (a *cep.ValidationError
// from the client) and changes nothing; a rollback makes the first
// version active again; a shadow deploy into this job without a shadow
// output is FAILED_PRECONDITION; after the job, a deploy is UNAVAILABLE
// again.
func TestControlDeploy(t *testing.T) {
	fx := newFixture(t)
	dir, v1, e, input, m, c := fx.dir, fx.v1, fx.e, fx.input, fx.m, fx.c
	v2src := []byte(testRules + addedRule)
	v2, err := rules.Load("c.cep", v2src)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Deploy(ctx, cep.Deploy{Name: "c.cep", Source: v2src}); status.Code(err) != codes.Unavailable {
		t.Errorf("Deploy before the job: %v, want UNAVAILABLE", err)
	}
	if _, err := c.Rollback(ctx, cep.SwitchOptions{}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("Rollback before the job: %v, want FAILED_PRECONDITION", err)
	}
	jctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	var logMu sync.Mutex
	var logged []string // the job's log lines
	logf := func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		logged = append(logged, fmt.Sprintf(format, args...))
	}
	warned := func() (ws []string) {
		logMu.Lock()
		defer logMu.Unlock()
		for _, l := range logged {
			if strings.HasPrefix(l, "warning: ") {
				ws = append(ws, l)
			}
		}
		return ws
	}
	go func() {
		_, err := e.Stream(jctx, cep.StreamConfig{
			Events: input, Follow: true, PollInterval: 10 * time.Millisecond, StateDir: filepath.Join(dir, "state"),
			AlertsDir: filepath.Join(dir, "alerts"), CheckpointInterval: time.Hour, Monitor: m, Logf: logf,
		})
		done <- err
	}()
	waitStatus(t, ctx, c, "not ready with 40 records", readyWith40)
	// active is the active version of ListVersions, and the list.
	active := func() (string, []cep.VersionInfo) {
		t.Helper()
		vs, err := c.ListVersions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(vs) == 0 || vs[0].State != cep.VersionActive {
			t.Fatalf("ListVersions: %v; want the active version first", vs)
		}
		return vs[0].Version, vs
	}
	if v, vs := active(); v != v1.Hash || len(vs) != 1 {
		t.Errorf("the versions at the start: %v; want %s alone", vs, v1.Hash)
	}
	r, err := c.Deploy(ctx, cep.Deploy{Name: "c.cep", Source: v2src})
	if err != nil {
		t.Fatal(err)
	}
	if r.Version != v2.Hash || r.Previous != v1.Hash || r.Ruleset != "c" || r.Checkpoint <= 0 || r.Unchanged ||
		!slices.Equal(r.Kept, []string{"big_then_foreign"}) || !slices.Equal(r.Added, []string{"two_big"}) ||
		len(r.Changed) != 0 || len(r.Removed) != 0 {
		t.Errorf("Deploy of a rule more: %v; want version %s after %s, big_then_foreign kept and two_big added at a checkpoint", r, v2.Hash, v1.Hash)
	}
	v, vs := active()
	if v != v2.Hash || len(vs) != 2 || vs[1].Version != v1.Hash || vs[1].State != cep.VersionPrevious ||
		vs[0].Origin != "grpc" || !slices.Equal(vs[0].Rules, []string{"big_then_foreign", "two_big"}) || time.Since(vs[0].Deployed) > time.Minute {
		t.Errorf("the versions after the deploy: %v; want %s active from grpc with its two rules, %s previous", vs, v2.Hash, v1.Hash)
	}
	if st, err := c.Status(ctx); err != nil || st.GetVersion() != v2.Hash {
		t.Errorf("Status after the deploy: %v, %v; want version %s", st, err, v2.Hash)
	}
	// The same version again switches nothing.
	if r, err := c.Deploy(ctx, cep.Deploy{Name: "c.cep", Source: v2src}); err != nil || !r.Unchanged || r.Version != v2.Hash {
		t.Errorf("Deploy of the active version: %v, %v; want ok and unchanged", r, err)
	}
	// A ruleset that does not compile: ok false and its problems in the
	// answer, a *cep.ValidationError from the client.
	badSrc := []byte(strings.Replace(testRules, `amount > 100`, `amount > "x" +`, 1))
	bad, err := cepheusv1.NewControlClient(c.conn).Deploy(ctx, &cepheusv1.DeployRequest{Name: "bad.cep", Source: badSrc})
	if err != nil || bad.GetOk() || len(bad.GetProblems()) == 0 {
		t.Fatalf("Deploy of a bad ruleset: %v, %v; want problems", bad, err)
	}
	if p := bad.GetProblems()[0]; p.GetFile() != "bad.cep" || p.GetLine() != 9 || p.GetColumn() <= 0 || p.GetMessage() == "" {
		t.Errorf("the problem: %v; want bad.cep line 9 with a column and a message", p)
	}
	var invalid *cep.ValidationError
	if _, err := c.Deploy(ctx, cep.Deploy{Name: "bad.cep", Source: badSrc}); !errors.As(err, &invalid) || len(invalid.Problems) == 0 ||
		invalid.Problems[0].Pos.Line != 9 || !strings.HasPrefix(invalid.Problems[0].Error(), "bad.cep:9:") {
		t.Errorf("Client.Deploy of a bad ruleset: %v; want a *cep.ValidationError at bad.cep:9", err)
	}
	if v, vs := active(); v != v2.Hash || len(vs) != 2 {
		t.Errorf("the versions after a refused deploy: %v; want %s still active", vs, v2.Hash)
	}
	// A rollback from a version that is not the active one is refused,
	// and one from no version's hash is an invalid argument.
	if _, err := c.Rollback(ctx, cep.SwitchOptions{From: v1.Hash[:12]}); status.Code(err) != codes.FailedPrecondition ||
		!strings.Contains(status.Convert(err).Message(), fmt.Sprintf("version %.12s is active, not %.12s: nothing switched", v2.Hash, v1.Hash)) {
		t.Errorf("Rollback from %.12s over %.12s: %v; want FAILED_PRECONDITION naming both", v1.Hash, v2.Hash, err)
	}
	if _, err := c.Rollback(ctx, cep.SwitchOptions{From: "v2"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("Rollback from \"v2\": %v; want INVALID_ARGUMENT", err)
	}
	if v, _ := active(); v != v2.Hash {
		t.Errorf("the refused rollbacks switched: %.12s active, want %.12s", v, v2.Hash)
	}
	r, err = c.Rollback(ctx, cep.SwitchOptions{From: v2.Hash})
	if err != nil || r.Version != v1.Hash || r.Previous != v2.Hash ||
		!slices.Equal(r.Removed, []string{"two_big"}) || !slices.Equal(r.Kept, []string{"big_then_foreign"}) {
		t.Errorf("Rollback: %v, %v; want %s again, two_big removed", r, err, v1.Hash)
	}
	if v, vs := active(); v != v1.Hash || vs[0].Origin != "rollback" {
		t.Errorf("the versions after the rollback: %v; want %s active from rollback", vs, v1.Hash)
	}
	// The job has no shadow output: a shadow deploy is refused, saying
	// how to start one with it.
	if _, err := c.Deploy(ctx, cep.Deploy{Name: "c.cep", Source: v2src, Shadow: true}); status.Code(err) != codes.FailedPrecondition ||
		status.Convert(err).Message() != strings.TrimPrefix(cep.ErrNoShadowOutput.Error(), "cep: ") {
		t.Errorf("shadow Deploy into a job without a shadow output: %v; want FAILED_PRECONDITION %q", err, cep.ErrNoShadowOutput)
	}
	// A deploy of a ruleset with a warning says it (the rollback before
	// said none).
	if len(r.Warnings) != 0 {
		t.Errorf("Rollback: warnings %v", r.Warnings)
	}
	if ws := warned(); len(ws) != 0 {
		t.Errorf("the job logged warnings for deploys without any: %q", ws)
	}
	r, err = c.Deploy(ctx, cep.Deploy{Name: "w.cep", Source: []byte(strings.Replace(testRules, "!= big.country", "!= foreign.country", 1))})
	if err != nil || len(r.Warnings) != 1 || !strings.HasPrefix(r.Warnings[0].Error(), "w.cep:10:41: warning: stage foreign takes one event") {
		t.Fatalf("Deploy of a ruleset with a warning: %v, %v; want one warning at w.cep:10:41", r, err)
	}
	// The job's log says it too, for whoever reads serve's log rather
	// than the caller's answer.
	if ws := warned(); len(ws) != 1 || !strings.HasPrefix(ws[0], "warning: w.cep:10:41: warning: stage foreign takes one event") ||
		!strings.HasSuffix(ws[0], fmt.Sprintf("(version %.12s)", r.Version)) {
		t.Errorf("the job's log of the deploy with a warning: %q; want one line \"warning: w.cep:10:41: warning: stage foreign takes one event ... (version %.12s)\"", ws, r.Version)
	}
	stop()
	if err := <-done; err != nil && err != context.Canceled {
		t.Fatal(err)
	}
	if _, err := c.Deploy(ctx, cep.Deploy{Name: "c.cep", Source: v2src}); status.Code(err) != codes.Unavailable {
		t.Errorf("Deploy after the job: %v, want UNAVAILABLE", err)
	}
}

// TestControlShadow runs a shadow version beside the active one through
// the client: a promote without a shadow is FAILED_PRECONDITION; a job
// with a shadow output takes a shadow deploy (a rule changed, one added);
// ListVersions shows the active version and the shadow; once more events
// came, Status has the shadow's hash and a row per shadow rule (the added
// one only the shadow's); the shadow's alerts are in the shadow directory
// only, with its version; Promote makes it active (the first version
// previous, no shadow left), and a promote again is FAILED_PRECONDITION.
func TestControlShadow(t *testing.T) {
	fx := newFixture(t)
	dir, v1, e, input, m, c := fx.dir, fx.v1, fx.e, fx.input, fx.m, fx.c
	v2src := []byte(strings.Replace(testRules, `amount > 100`, `amount > 50`, 1) + addedRule)
	v2, err := rules.Load("c.cep", v2src)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	jctx, stop := context.WithCancel(context.Background())
	defer stop()
	alertsDir, shadowDir := filepath.Join(dir, "alerts"), filepath.Join(dir, "shadow")
	done := make(chan error, 1)
	go func() {
		_, err := e.Stream(jctx, cep.StreamConfig{
			Events: input, Follow: true, PollInterval: 10 * time.Millisecond, StateDir: filepath.Join(dir, "state"),
			AlertsDir: alertsDir, ShadowDir: shadowDir, CheckpointInterval: time.Hour, Monitor: m,
		})
		done <- err
	}()
	// waitStatus waits up to 20 s for a status that satisfies cond.
	waitStatus(t, ctx, c, "not ready with 40 records", readyWith40)
	if _, err := c.Promote(ctx, cep.SwitchOptions{}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("Promote without a shadow: %v, want FAILED_PRECONDITION", err)
	}
	r, err := c.Deploy(ctx, cep.Deploy{Name: "c.cep", Source: v2src, Shadow: true})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Shadow || r.Version != v2.Hash || r.Unchanged || r.Checkpoint <= 0 {
		t.Errorf("shadow Deploy: %+v; want version %s as the shadow at a checkpoint", r, v2.Hash)
	}
	vs, err := c.ListVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2 || vs[0].Version != v1.Hash || vs[0].State != cep.VersionActive ||
		vs[1].Version != v2.Hash || vs[1].State != cep.VersionShadow || vs[1].Origin != "grpc" {
		t.Errorf("the versions after the shadow deploy: %+v; want %s active, %s shadow from grpc", vs, v1.Hash, v2.Hash)
	}
	// More events, seen by both versions.
	f, err := os.OpenFile(input, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(events(40, 40)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	row := func(st *cepheusv1.StatusResponse, rule string) *cepheusv1.ShadowRuleStatus {
		for _, r := range st.GetShadow() {
			if r.GetRule() == rule {
				return r
			}
		}
		return nil
	}
	st := waitStatus(t, ctx, c, "no shadow alerts of both rules", func(st *cepheusv1.StatusResponse) bool {
		a, b := row(st, "big_then_foreign"), row(st, "two_big")
		return st.GetRecords() == 80 && a != nil && a.GetShadow() > 0 && b != nil && b.GetShadow() > 0
	})
	if st.GetShadowVersion() != v2.Hash || st.GetVersion() != v1.Hash || len(st.GetShadow()) != 2 {
		t.Errorf("Status with a shadow: %v; want version %s, shadow %s with 2 rules", st, v1.Hash, v2.Hash)
	}
	// big_then_foreign matches the same events in both versions (every
	// amount is 500); two_big is the shadow's alone.
	if a := row(st, "big_then_foreign"); a.GetActive() == 0 || a.GetOverlap() == 0 || a.GetOnlyActive() != a.GetActive()-a.GetOverlap() || a.GetOnlyShadow() != a.GetShadow()-a.GetOverlap() {
		t.Errorf("the row of big_then_foreign: %v; want active and overlapping alerts, only-active and only-shadow the differences", a)
	}
	if b := row(st, "two_big"); b.GetActive() != 0 || b.GetOverlap() != 0 || b.GetOnlyShadow() != b.GetShadow() {
		t.Errorf("the row of two_big (the shadow's alone): %v; want no active alerts, all only the shadow's", b)
	}
	// The alerts committed so far: the active version's in the main
	// directory, the shadow's in the shadow directory.
	if _, err := c.TriggerCheckpoint(ctx); err != nil {
		t.Fatal(err)
	}
	if n := versionsIn(t, alertsDir, "alerts-")[v2.Hash]; n != 0 {
		t.Errorf("%d alerts of the shadow version in the main alerts directory", n)
	}
	inShadow := versionsIn(t, shadowDir, "shadow-")
	if inShadow[v2.Hash] == 0 || len(inShadow) != 1 {
		t.Errorf("the shadow directory's alerts by version: %v; want only %s's", inShadow, v2.Hash)
	}
	// Promote.
	r, err = c.Promote(ctx, cep.SwitchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Version != v2.Hash || r.Previous != v1.Hash || r.Shadow || r.Unchanged ||
		!slices.Equal(r.Changed, []string{"big_then_foreign"}) || !slices.Equal(r.Added, []string{"two_big"}) {
		t.Errorf("Promote: %+v; want %s active after %s, big_then_foreign changed and two_big added", r, v2.Hash, v1.Hash)
	}
	vs, err = c.ListVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2 || vs[0].Version != v2.Hash || vs[0].State != cep.VersionActive || vs[0].Origin != "promote" ||
		vs[1].Version != v1.Hash || vs[1].State != cep.VersionPrevious {
		t.Errorf("the versions after the promote: %+v; want %s active from promote, %s previous, no shadow", vs, v2.Hash, v1.Hash)
	}
	if st, err := c.Status(ctx); err != nil || st.GetVersion() != v2.Hash || st.GetShadowVersion() != "" || len(st.GetShadow()) != 0 {
		t.Errorf("Status after the promote: %v, %v; want version %s and no shadow", st, err, v2.Hash)
	}
	if _, err := c.Promote(ctx, cep.SwitchOptions{}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("Promote again: %v, want FAILED_PRECONDITION", err)
	}
	stop()
	if err := <-done; err != nil && err != context.Canceled {
		t.Fatal(err)
	}
}

// TestControlShadowRollback: a shadow that never was active is no
// rollback target. Over a job with a shadow output: v2 deployed, v3 then
// v4 as the shadow; ListVersions lists v2 active, v4 the shadow, v1
// previous (not v3, which only ran as the shadow); Rollback returns to
// v1; the list after it is v1, the shadow, then v2. A shadow deploy of
// the active version is FAILED_PRECONDITION. A restart without a shadow
// output drops the shadow, which is no previous version either.
func TestControlShadowRollback(t *testing.T) {
	fx := newFixture(t)
	dir, v1, e, input, m, c := fx.dir, fx.v1, fx.e, fx.input, fx.m, fx.c
	var srcs [5][]byte // srcs[i] is version i's (1 to 4)
	names := map[string]string{v1.Hash: "v1"}
	for i := 2; i <= 4; i++ {
		srcs[i] = []byte(strings.Replace(testRules, `amount > 100`, fmt.Sprintf(`amount > %d`, 100+i), 1))
		rs, err := rules.Load("c.cep", srcs[i])
		if err != nil {
			t.Fatal(err)
		}
		names[rs.Hash] = fmt.Sprintf("v%d", i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// start runs the job, with a shadow output or not, until the
	// returned stop, once its status satisfies ready (the monitor keeps
	// the last job's until the new one publishes its own).
	start := func(shadowDir string, ready func(*cepheusv1.StatusResponse) bool) (stop func()) {
		jctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := e.Stream(jctx, cep.StreamConfig{
				Events: input, Follow: true, PollInterval: 10 * time.Millisecond, StateDir: filepath.Join(dir, "state"),
				AlertsDir: filepath.Join(dir, "alerts"), ShadowDir: shadowDir, CheckpointInterval: time.Hour, Monitor: m,
				Logf: t.Logf,
			})
			done <- err
		}()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			st, err := c.Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if ready(st) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("not ready after 20s: %v", st)
			}
		}
		return func() {
			cancel()
			if err := <-done; err != nil && err != context.Canceled {
				t.Fatal(err)
			}
		}
	}
	// listed is ListVersions as "name:state ...".
	listed := func() string {
		t.Helper()
		vs, err := c.ListVersions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, v := range vs {
			out = append(out, names[v.Version]+":"+string(v.State))
		}
		return strings.Join(out, " ")
	}
	deploy := func(i int, shadow bool) {
		t.Helper()
		if _, err := c.Deploy(ctx, cep.Deploy{Name: "c.cep", Source: srcs[i], Shadow: shadow}); err != nil {
			t.Fatalf("Deploy of v%d (shadow %v): %v", i, shadow, err)
		}
	}
	stop := start(filepath.Join(dir, "shadow"), readyWith40)
	deploy(2, false)
	deploy(3, true)
	deploy(4, true)
	if got, want := listed(), "v2:active v4:shadow v1:previous"; got != want {
		t.Errorf("the versions after v3 then v4 as the shadow: %s; want %s", got, want)
	}
	_, err := c.Deploy(ctx, cep.Deploy{Name: "c.cep", Source: srcs[2], Shadow: true})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), "the active version cannot be the shadow") {
		t.Errorf("a shadow Deploy of the active version: %v; want FAILED_PRECONDITION, the active version cannot be the shadow", err)
	}
	r, err := c.Rollback(ctx, cep.SwitchOptions{})
	if err != nil || names[r.Version] != "v1" || names[r.Previous] != "v2" {
		t.Fatalf("Rollback: %+v, %v; want v1 again (was v2)", r, err)
	}
	if got, want := listed(), "v1:active v4:shadow v2:previous"; got != want {
		t.Errorf("the versions after the rollback: %s; want %s", got, want)
	}
	stop()
	stop = start("", func(st *cepheusv1.StatusResponse) bool { return st.GetReady() && st.GetShadowVersion() == "" })
	if got, want := listed(), "v1:active v2:previous"; got != want {
		t.Errorf("the versions after a restart without a shadow output: %s; want %s", got, want)
	}
	stop()
}

// versionsIn counts the alerts of the committed part files of dir whose
// names start with prefix, by ruleset_version.
func versionsIn(t *testing.T, dir, prefix string) map[string]int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, prefix+"*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if l == "" {
				continue
			}
			var a struct {
				Version string `json:"ruleset_version"`
			}
			if err := json.Unmarshal([]byte(l), &a); err != nil {
				t.Fatalf("%s: %v: %q", file, err, l)
			}
			out[a.Version]++
		}
	}
	return out
}

// waitStatus polls c's Status until cond holds, at most 20 s (then it
// fails the test saying what), and returns the status that met it.
func waitStatus(t *testing.T, ctx context.Context, c *Client, what string, cond func(*cepheusv1.StatusResponse) bool) *cepheusv1.StatusResponse {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st, err := c.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20s, %s: %v", what, st)
		}
	}
}

// readyWith40 is the status of a job ready with the tests' 40 records read.
func readyWith40(st *cepheusv1.StatusResponse) bool { return st.GetReady() && st.GetRecords() == 40 }

// TestStatusFormer: Status has the rules the active version has not
// (removed, of a former severity) apart, with their figures, so that the
// rules add up to the alerts; it left them out. A rule's emit errors and
// events without the key are in it too.
func TestStatusFormer(t *testing.T) {
	st := statusOf(cep.MonitorSnapshot{
		Progress: cep.StreamProgress{StreamStats: cep.StreamStats{Alerts: 3832}},
		Rules:    []cep.RuleCount{{Rule: "a", Severity: "high", Alerts: 3786, EmitErrors: 4, NoKey: 2}},
		Former: []cep.RuleCount{
			{Rule: "gone", Severity: "medium", Alerts: 10, ConditionErrors: 7},
			{Rule: "a", Severity: "low", Alerts: 36, EmitErrors: 1, NoKey: 9, Dropped: 5},
		},
	})
	var sum int64
	var rows []string
	for _, rs := range [][]*cepheusv1.RuleStatus{st.GetRules(), st.GetFormer()} {
		for _, r := range rs {
			sum += r.GetAlerts()
			rows = append(rows, fmt.Sprintf("%s/%s %d %d %d %d %d", r.GetRule(), r.GetSeverity(), r.GetAlerts(), r.GetConditionErrors(), r.GetEmitErrors(), r.GetDropped(), r.GetNoKey()))
		}
		rows = append(rows, "|")
	}
	want := []string{"a/high 3786 0 4 0 2", "|", "gone/medium 10 7 0 0 0", "a/low 36 0 1 5 9", "|"}
	if !slices.Equal(rows, want) || sum != st.GetAlerts() {
		t.Errorf("status rules | former: %q, their alerts %d; want %q, %d", rows, sum, want, st.GetAlerts())
	}
}

// TestServeUnix: on unix:PATH the control API listens on a Unix socket
// that only its user may connect to (mode 0600, whatever the umask), which
// the client reaches at the server's Addr; a second server on the path is
// refused while the first serves, a socket left by a dead server is
// replaced, and a file that is no socket is left alone. Only TCP was
// served, to which every local user may connect, even on loopback.
func TestServeUnix(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "control.sock")
	srv, err := Serve("unix:"+path, cep.NewStreamMonitor())
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Type() != os.ModeSocket || st.Mode().Perm() != 0o600 {
		t.Errorf("%s: mode %v, want a socket of mode 0600", path, st.Mode())
	}
	if srv.Addr() != "unix:"+path {
		t.Errorf("Addr() = %q, want unix:%s", srv.Addr(), path)
	}
	c, err := Dial(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if r, err := c.Status(ctx); err != nil || r.GetReady() {
		t.Errorf("Status over the socket: %v, %v; want an answer, not ready", r, err)
	}
	if _, err := Serve("unix:"+path, cep.NewStreamMonitor()); err == nil || !strings.Contains(err.Error(), path+" is in use: another process serves on it") {
		t.Errorf("a second Serve on %s: %v, want in use", path, err)
	}
	srv.Close()
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Close: %v, want the socket removed", err)
	}

	// A socket a dead process left (not removed at its close).
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	srv, err = Serve("unix:"+path, cep.NewStreamMonitor())
	if err != nil {
		t.Fatalf("Serve over a dead server's socket: %v", err)
	}
	srv.Close()

	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Serve("unix:"+file, cep.NewStreamMonitor()); err == nil || !strings.Contains(err.Error(), file+" exists and is not a socket") {
		t.Errorf("Serve on a regular file: %v, want refused", err)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "keep" {
		t.Errorf("the regular file: %q, %v; want it untouched", b, err)
	}
}

// TestSourceCallsBound: at most the bound of Validate and Deploy calls
// (the ones that carry a ruleset's source, up to 64 MiB each) are taken
// at once; one more is refused ABORTED before its message is read, and
// each call's end frees its place, however it ends. Other calls pass.
func TestSourceCallsBound(t *testing.T) {
	l := &sourceCalls{max: 2}
	validate := &tap.Info{FullMethodName: cepheusv1.Control_Validate_FullMethodName}
	deploy := &tap.Info{FullMethodName: cepheusv1.Control_Deploy_FullMethodName}
	var cancels []context.CancelFunc
	for _, info := range []*tap.Info{validate, deploy} {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cancels = append(cancels, cancel)
		if _, err := l.tap(ctx, info); err != nil {
			t.Fatalf("call %s, below the bound: %v", info.FullMethodName, err)
		}
	}
	for _, info := range []*tap.Info{validate, deploy} {
		_, err := l.tap(context.Background(), info)
		if status.Code(err) != codes.Aborted || !strings.Contains(err.Error(), "2 validate or deploy calls are in progress") {
			t.Errorf("call %s over the bound: %v, want ABORTED, saying why", info.FullMethodName, err)
		}
	}
	for _, m := range []string{cepheusv1.Control_Status_FullMethodName, cepheusv1.Control_Rollback_FullMethodName, "/grpc.health.v1.Health/Check"} {
		if _, err := l.tap(context.Background(), &tap.Info{FullMethodName: m}); err != nil {
			t.Errorf("call %s, which carries no source, at the bound: %v", m, err)
		}
	}
	cancels[0]() // the first call ends
	deadline := time.Now().Add(5 * time.Second)
	for l.n.Load() != 1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if _, err := l.tap(context.Background(), validate); err != nil {
		t.Errorf("a call after one ended: %v", err)
	}

	// Through a server: with no place, Validate is refused, and the
	// client sends it again until its context ends; with one place,
	// calls one after the other all pass (each frees its place).
	for _, bound := range []int64{0, 1} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := serve(ln, cep.NewStreamMonitor(), bound, Options{})
		defer srv.Close()
		c, err := Dial(srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for i := range 1 + 4*bound {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			start := time.Now()
			r, err := c.Validate(ctx, "c.cep", []byte(testRules))
			cancel()
			switch {
			case bound == 0 && (status.Code(err) != codes.Aborted || time.Since(start) < 190*time.Millisecond):
				// The client stops when less than its 100 ms pause is
				// left: an attempt started later ended at the deadline
				// (DEADLINE_EXCEEDED, CI under load).
				t.Fatalf("Validate with no place: %v after %v, want ABORTED once less than 100 ms of its context was left", err, time.Since(start))
			case bound == 1 && (err != nil || !r.GetOk()):
				t.Fatalf("Validate %d with one place, one call at a time: %v, %v", i, r, err)
			}
		}
	}
}

// TestServeUnixBusy: a socket whose server is alive but does not take a
// connection now (its backlog full: a serve stopped, or overloaded) is
// not replaced. Any failed connection was taken for a dead server's: the
// socket was removed and a second server listened in its place, leaving
// the first unreachable.
func TestServeUnixBusy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "control.sock")
	// A listener with the smallest backlog, that never accepts: one
	// connection fills it.
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	for {
		c, err := net.DialTimeout("unix", path, time.Second)
		if err != nil {
			if !errors.Is(err, syscall.EAGAIN) {
				t.Fatalf("filling the backlog: %v, want EAGAIN", err)
			}
			break
		}
		defer c.Close()
	}
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Serve("unix:"+path, cep.NewStreamMonitor())
	if err == nil {
		srv.Close()
	}
	if err == nil || !strings.Contains(err.Error(), path+" is a socket that takes no connection now (dial unix "+path+": connect: resource temporarily unavailable): a server may still own it; remove it if none does") {
		t.Errorf("Serve on a busy server's socket: %v, want refused", err)
	}
	if after, err := os.Stat(path); err != nil || !os.SameFile(before, after) {
		t.Errorf("the busy server's socket was removed or replaced (%v), want it kept", err)
	}
}

// TestProblemsCount: the problems of a ruleset with more errors than a
// file reports, through the API and back, count every error: rules
// validate and deploy said "21 problems" of a file with 30, counting the
// entry that ends the capped list as one.
func TestProblemsCount(t *testing.T) {
	var b strings.Builder
	b.WriteString("ruleset many\nevent time ts\n")
	for i := range 30 {
		fmt.Fprintf(&b, "bogus%d }\n", i)
	}
	_, err := rules.Load("many.cep", []byte(b.String()))
	ps := problemsOf("many.cep", err)
	if len(ps) != rules.MaxErrors+1 {
		t.Fatalf("%d problems, want %d (the capped list)", len(ps), rules.MaxErrors+1)
	}
	if n := ErrorsOf(ps).Count(); n != 30 {
		t.Errorf("the problems count %d errors, want 30", n)
	}
}
