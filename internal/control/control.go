// Package control is the gRPC control API of cepheus serve (cepheus.v1,
// cepheusv1/control.proto; this and cepheusv1 are the only packages that
// import google.golang.org/grpc): the Control service over a
// cep.StreamMonitor, with the standard health and reflection services so
// that grpcurl works, and the client the CLI uses (cepheus status,
// cepheus rules validate, deploy, list, rollback and promote).
package control

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cepheus-cep/cepheus/cep"
	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/internal/control/cepheusv1"
	"github.com/cepheus-cep/cepheus/rules"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/proto"
)

// service implements cepheusv1.ControlServer over a monitor.
type service struct {
	cepheusv1.UnimplementedControlServer
	m       *cep.StreamMonitor
	refused func(msg string) // Options.Refused
}

// Options are a control server's options (the zero value: none).
type Options struct {
	// Refused, when set, is told of each deploy, rollback or promote
	// the server refused, in a line for serve's log ("deploy of r.cep
	// refused: 2 problems, the first: r.cep:5:3: ..."): the caller had
	// the answer, the server's log had nothing of it (its switches are
	// logged).
	Refused func(msg string)
}

// logRefused tells s.refused of a call (what: "deploy of r.cep",
// "rollback", "promote") that ended in err.
func (s *service) logRefused(ctx context.Context, what string, err error) {
	if err == nil || s.refused == nil || ctx.Err() != nil {
		return
	}
	var invalid *cep.ValidationError
	msg := messageOf(err)
	if errors.As(err, &invalid) && len(invalid.Problems) > 0 {
		n := invalid.Problems.Count()
		msg = fmt.Sprintf("%d problem", n)
		if n != 1 {
			msg += "s"
		}
		msg += ", the first: " + invalid.Problems[0].Error()
	}
	s.refused(what + " refused: " + msg)
}

func (s *service) Validate(_ context.Context, req *cepheusv1.ValidateRequest) (*cepheusv1.ValidateResponse, error) {
	name := req.GetName()
	if name == "" {
		name = "ruleset.cep"
	}
	rs, err := rules.Load(name, req.GetSource())
	if err != nil {
		return &cepheusv1.ValidateResponse{Problems: problemsOf(name, err)}, nil
	}
	resp := &cepheusv1.ValidateResponse{Ok: true, Ruleset: rs.Name, Version: rs.Hash, Warnings: problemsOf(name, rs.Warnings)}
	for _, r := range rs.Rules {
		resp.Rules = append(resp.Rules, r.Name)
	}
	return resp, nil
}

// problemsOf is the problems of a ruleset named name that does not
// compile: each positioned error of err with its line and column, or err
// itself (none for an empty rules.ErrorList: the warnings of one that
// does).
func problemsOf(name string, err error) []*cepheusv1.Problem {
	var list rules.ErrorList
	if !errors.As(err, &list) {
		return []*cepheusv1.Problem{{File: name, Message: err.Error()}}
	}
	var out []*cepheusv1.Problem
	for _, e := range list {
		out = append(out, &cepheusv1.Problem{
			File: e.Pos.Filename, Line: int32(e.Pos.Line), Column: int32(e.Pos.Column), Message: e.Msg,
		})
	}
	return out
}

func (s *service) Deploy(ctx context.Context, req *cepheusv1.DeployRequest) (*cepheusv1.DeployResponse, error) {
	if req.GetShadow() && req.GetDropChanged() {
		// As the CLI refuses -shadow -drop-changed: a shadow deploy
		// drains nothing, and the flag would be ignored without a word.
		return nil, status.Error(codes.InvalidArgument, "drop_changed goes with a deploy of the active version, not with shadow (a shadow version drains nothing; Promote's drop_changed drops at the promotion)")
	}
	name := req.GetName()
	if name == "" {
		name = "ruleset.cep"
	}
	r, err := s.m.Deploy(ctx, cep.Deploy{Name: name, Source: req.GetSource(), DropChanged: req.GetDropChanged(), Shadow: req.GetShadow(), From: req.GetFrom(), Origin: "grpc"})
	s.logRefused(ctx, "deploy of "+name, err)
	return deployAnswer(ctx, name, r, err)
}

func (s *service) Promote(ctx context.Context, req *cepheusv1.PromoteRequest) (*cepheusv1.DeployResponse, error) {
	r, err := s.m.Promote(ctx, cep.SwitchOptions{DropChanged: req.GetDropChanged(), From: req.GetFrom()})
	s.logRefused(ctx, "promote", err)
	return deployAnswer(ctx, "", r, err)
}

func (s *service) Rollback(ctx context.Context, req *cepheusv1.RollbackRequest) (*cepheusv1.DeployResponse, error) {
	r, err := s.m.Rollback(ctx, cep.SwitchOptions{DropChanged: req.GetDropChanged(), From: req.GetFrom()})
	s.logRefused(ctx, "rollback", err)
	return deployAnswer(ctx, "", r, err)
}

// messageOf is err's message for a client, without the engine's package
// prefixes ("cep: ", "cep: stream: "), which name Go packages, not what
// went wrong.
func messageOf(err error) string {
	msg := err.Error()
	for _, p := range []string{"cep: ", "stream: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return msg
}

// deployAnswer is the answer of a deploy (of the ruleset named name), a
// rollback or a promote that returned r and err: a ruleset that does not
// compile is an answer with its problems, no job UNAVAILABLE; no previous
// version, no shadow version, a shadow deploy into a job without a
// shadow output or of the active version, a version the job refuses
// (cep.ErrRefused), a from that is not the active version
// (cep.ErrNotActive), a version another call's took the place of in the
// Kafka rules topic (cep.ErrSuperseded), an instance that reads no
// partition of its group (cep.ErrStandby) FAILED_PRECONDITION; a from that names no version
// INVALID_ARGUMENT; another deploy switching ABORTED (send it again).
func deployAnswer(ctx context.Context, name string, r *cep.DeployResult, err error) (*cepheusv1.DeployResponse, error) {
	var invalid *cep.ValidationError
	switch {
	case err == nil:
	case errors.As(err, &invalid):
		return &cepheusv1.DeployResponse{Problems: problemsOf(name, invalid)}, nil
	case errors.Is(err, cep.ErrStandby):
		// Not UNAVAILABLE: the client reads an UNAVAILABLE not of noJob as
		// a connection lost, and sending it again here changes nothing.
		return nil, status.Error(codes.FailedPrecondition, messageOf(err))
	case errors.Is(err, cep.ErrNoJob):
		return nil, status.Error(codes.Unavailable, noJob+" (the engine's run has not begun, or has ended); try again")
	case errors.Is(err, cep.ErrNoPrevious):
		return nil, status.Error(codes.FailedPrecondition, "no previous version to roll back to (cepheus rules list shows the versions)")
	case errors.Is(err, cep.ErrNoShadow):
		return nil, status.Error(codes.FailedPrecondition, "no shadow version to promote: deploy one first (cepheus rules deploy -shadow; cepheus rules list shows the versions)")
	case errors.Is(err, cep.ErrNoShadowOutput), errors.Is(err, cep.ErrShadowActive), errors.Is(err, cep.ErrRefused), errors.Is(err, cep.ErrNotActive), errors.Is(err, cep.ErrSuperseded):
		return nil, status.Error(codes.FailedPrecondition, messageOf(err))
	case errors.Is(err, cep.ErrBadFrom):
		return nil, status.Error(codes.InvalidArgument, messageOf(err))
	case errors.Is(err, cep.ErrSwitching):
		return nil, status.Error(codes.Aborted, messageOf(err))
	case ctx.Err() != nil:
		return nil, status.FromContextError(ctx.Err()).Err()
	default:
		return nil, status.Error(codes.Unknown, messageOf(err))
	}
	return &cepheusv1.DeployResponse{
		Ok: true, Ruleset: r.Ruleset, Version: r.Version, Previous: r.Previous, Checkpoint: r.Checkpoint,
		Kept: r.Kept, Changed: r.Changed, Added: r.Added, Removed: r.Removed, Unchanged: r.Unchanged,
		TookMs: r.Took.Milliseconds(), WatermarkUnixMs: int64(r.Watermark), Shadow: r.Shadow,
		Warnings: problemsOf(name, r.Warnings),
	}, nil
}

func (s *service) ListVersions(context.Context, *cepheusv1.ListVersionsRequest) (*cepheusv1.ListVersionsResponse, error) {
	resp := &cepheusv1.ListVersionsResponse{}
	for _, v := range s.m.Versions() {
		resp.Versions = append(resp.Versions, &cepheusv1.VersionInfo{
			Ruleset: v.Ruleset, Version: v.Version, State: string(v.State),
			DeployedUnixMs: v.Deployed.UnixMilli(), Origin: v.Origin, Rules: v.Rules,
		})
	}
	return resp, nil
}

func (s *service) Status(context.Context, *cepheusv1.StatusRequest) (*cepheusv1.StatusResponse, error) {
	return statusOf(s.m.Snapshot()), nil
}

// statusOf is the Status answer of a snapshot.
func statusOf(sn cep.MonitorSnapshot) *cepheusv1.StatusResponse {
	p := sn.Progress
	resp := &cepheusv1.StatusResponse{
		Ready: sn.Ready, Standby: sn.Standby, Ruleset: sn.Ruleset, Version: sn.RulesetVersion,
		Records: p.Records, Decoded: p.Decoded, Dead: p.Dead, Late: p.Late, Alerts: p.Alerts,
		WatermarkUnixMs: int64(p.Watermark), LastCheckpoint: p.LastCheckpoint,
		LastCheckpointDurationMs: p.LastDuration.Milliseconds(), Keys: p.Keys, Queued: p.Queued,
		CheckpointFailures: sn.CheckpointFailures, ShadowVersion: sn.ShadowVersion,
	}
	if p.Watermark > event.MinTime && p.Watermark < event.MaxTime {
		resp.WatermarkLagMs = max(0, int64(p.MaxEventTime-p.Watermark))
	}
	for _, r := range sn.Rules {
		resp.Rules = append(resp.Rules, ruleStatus(r))
	}
	// The rules the active version has not keep their figures: without
	// them the rules did not add up to the alerts (a removed rule's, a
	// former severity's).
	for _, r := range sn.Former {
		resp.Former = append(resp.Former, ruleStatus(r))
	}
	for _, r := range sn.Draining {
		resp.Draining = append(resp.Draining, &cepheusv1.DrainingRule{Rule: r.Rule, Version: r.Version, UntilUnixMs: int64(r.Until)})
	}
	for _, r := range sn.Shadow {
		resp.Shadow = append(resp.Shadow, &cepheusv1.ShadowRuleStatus{
			Rule: r.Rule, Active: r.Active, Shadow: r.Shadow, Overlap: r.Overlap,
			OnlyActive: r.Active - r.Overlap, OnlyShadow: r.Shadow - r.Overlap, Unchanged: r.Unchanged,
		})
	}
	for name, wm := range sn.PartitionWatermarks {
		ps := &cepheusv1.PartitionStatus{Partition: name, WatermarkUnixMs: wm, Idle: sn.IdlePartitions[name]}
		if lag, ok := sn.KafkaLag[name]; ok {
			ps.Lag = &lag
		}
		resp.Partitions = append(resp.Partitions, ps)
	}
	for _, l := range sn.Lookups {
		resp.Lookups = append(resp.Lookups, &cepheusv1.LookupStatus{
			Name: l.Name, Bound: l.Bound, Hits: l.Hits, Misses: l.Misses, NotFound: l.NotFound, Unreadable: l.Unreadable,
			Requests: l.Requests, Failures: l.Failures, Timeouts: l.Timeouts, Defaulted: l.Defaulted, Rejected: l.Rejected,
			LastError: l.LastError,
		})
	}
	for _, a := range sn.Aggregates {
		resp.Aggregates = append(resp.Aggregates, &cepheusv1.AggregateStatus{Name: a.Name, Keys: int64(a.Keys), Dropped: a.Dropped, HotKeys: int64(a.HotKeys)})
	}
	slices.SortFunc(resp.Partitions, func(a, b *cepheusv1.PartitionStatus) int {
		return comparePartitions(a.GetPartition(), b.GetPartition())
	})
	return resp
}

// StatusLookups returns the lookups' counters of a Status answer, as the
// job's monitor has them (but their latency histograms).
func StatusLookups(st *cepheusv1.StatusResponse) []cep.LookupStats {
	var out []cep.LookupStats
	for _, l := range st.GetLookups() {
		s := cep.LookupStats{Name: l.GetName(), Bound: l.GetBound()}
		s.Hits, s.Misses, s.NotFound, s.Unreadable = l.GetHits(), l.GetMisses(), l.GetNotFound(), l.GetUnreadable()
		s.Requests, s.Failures, s.Timeouts = l.GetRequests(), l.GetFailures(), l.GetTimeouts()
		s.Defaulted, s.Rejected, s.LastError = l.GetDefaulted(), l.GetRejected(), l.GetLastError()
		out = append(out, s)
	}
	return out
}

// StatusAggregates returns the velocity aggregates' figures of a Status
// answer, as the job's monitor has them.
func StatusAggregates(st *cepheusv1.StatusResponse) []cep.AggregateStats {
	var out []cep.AggregateStats
	for _, a := range st.GetAggregates() {
		out = append(out, cep.AggregateStats{Name: a.GetName(), Keys: int(a.GetKeys()), Dropped: a.GetDropped(), HotKeys: int(a.GetHotKeys())})
	}
	return out
}

// ruleStatus is a rule's counters as Status has them.
func ruleStatus(r cep.RuleCount) *cepheusv1.RuleStatus {
	return &cepheusv1.RuleStatus{
		Rule: r.Rule, Severity: r.Severity, Alerts: r.Alerts, ConditionErrors: r.ConditionErrors, Dropped: r.Dropped,
		TimedOut: r.TimedOut, TimeoutSeverity: r.TimeoutSeverity, EmitErrors: r.EmitErrors, NoKey: r.NoKey,
	}
}

// comparePartitions orders partition names (file names, TOPIC-P) as
// people number things: runs of digits by their value, the rest by
// bytes (t-2 before t-10, day-9.jsonl before day-10.jsonl).
func comparePartitions(a, b string) int {
	digit := func(c byte) bool { return '0' <= c && c <= '9' }
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if !digit(a[i]) || !digit(b[j]) {
			if c := cmp.Compare(a[i], b[j]); c != 0 {
				return c
			}
			i, j = i+1, j+1
			continue
		}
		ei, ej := i, j
		for ei < len(a) && digit(a[ei]) {
			ei++
		}
		for ej < len(b) && digit(b[ej]) {
			ej++
		}
		na, nb := strings.TrimLeft(a[i:ei], "0"), strings.TrimLeft(b[j:ej], "0")
		if c := cmp.Compare(len(na), len(nb)); c != 0 {
			return c
		}
		if c := strings.Compare(na, nb); c != 0 {
			return c
		}
		i, j = ei, ej
	}
	if c := cmp.Compare(len(a)-i, len(b)-j); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

// noJob begins the message of every UNAVAILABLE the service answers
// itself (Client.Lost tells them from gRPC's).
const noJob = "no job is running"

// noJobCheckpoint is the message of a TriggerCheckpoint while no job is
// ready. It names every such moment, a switch's among them (a deploy,
// a rollback or a promote in flight: the most frequent in file mode,
// where there is no rebalance), and that a call a moment later may do.
const noJobCheckpoint = noJob + " (it restores its state, switches to another ruleset version, is between two jobs of a rebalance, or the run has ended): try again once cepheus status says ready"

func (s *service) TriggerCheckpoint(ctx context.Context, _ *cepheusv1.TriggerCheckpointRequest) (*cepheusv1.TriggerCheckpointResponse, error) {
	if !s.m.Ready() {
		return nil, status.Error(codes.Unavailable, noJobCheckpoint)
	}
	before := s.m.RequestCheckpoint()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		// Complete, and its alerts in their files.
		if id := s.m.Snapshot().Progress.LastCheckpoint; id > before && s.m.Committed() >= id {
			return &cepheusv1.TriggerCheckpointResponse{Checkpoint: id}, nil
		}
		select {
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		case <-tick.C:
		}
	}
}

// MaxMessage is the largest message the control API takes, a ruleset's
// source and its few other fields: gRPC's default, 4 MiB, refused a
// ruleset that cepheus check, -rules and -rules-dir take
// (RESOURCE_EXHAUSTED, "received message larger than max").
const MaxMessage = 64 << 20

// MaxSourceCalls is the most Validate and Deploy calls, those that carry
// a ruleset's source (up to MaxMessage each), that a server takes at
// once: one more is refused ABORTED as soon as its headers arrive,
// before its message is read, so that these calls cannot make the server
// hold many messages of 64 MiB at once. The client sends a refused call
// again (every 100 ms, until its context ends), as it does while another
// deploy switches; deploys are taken one at a time anyway. The other
// calls are not counted, though their requests may be as large
// (MaxRecvMsgSize is the server's, not a method's): a Status request of
// 60 MiB (unknown fields) is read whatever the count.
const MaxSourceCalls = 4

// sourceCalls counts the calls carrying a source in progress
// (MaxSourceCalls).
type sourceCalls struct {
	max int64
	n   atomic.Int64
}

// tap admits a call carrying a source while fewer than max are in
// progress; the others pass. The count drops when the call's stream
// ends (its context is cancelled then, whatever the way it ends).
func (l *sourceCalls) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	switch info.FullMethodName {
	case cepheusv1.Control_Validate_FullMethodName, cepheusv1.Control_Deploy_FullMethodName:
	default:
		return ctx, nil
	}
	if l.n.Add(1) > l.max {
		l.n.Add(-1)
		return ctx, status.Errorf(codes.Aborted, "%d validate or deploy calls are in progress, the most the server takes at once: try again", l.max)
	}
	context.AfterFunc(ctx, func() { l.n.Add(-1) })
	return ctx, nil
}

// Server serves the control API until Close.
type Server struct {
	srv    *grpc.Server
	health *health.Server
	ln     net.Listener
	done   chan error
}

// Serve listens on addr (host:port, port 0 picking one; or unix:PATH, see
// [ListenUnix]) and serves the Control, health and reflection services in
// the background. The health service says SERVING for "" and
// cepheus.v1.Control once m is ready, NOT_SERVING before.
func Serve(addr string, m *cep.StreamMonitor, o ...Options) (*Server, error) {
	var ln net.Listener
	var err error
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		ln, err = ListenUnix(path)
	} else {
		ln, err = net.Listen("tcp", addr)
	}
	if err != nil {
		return nil, fmt.Errorf("control: %w", err)
	}
	var opt Options
	if len(o) > 0 {
		opt = o[0]
	}
	return serve(ln, m, MaxSourceCalls, opt), nil
}

// serve serves on ln, with at most maxSource calls carrying a source at
// once.
func serve(ln net.Listener, m *cep.StreamMonitor, maxSource int64, o Options) *Server {
	calls := &sourceCalls{max: maxSource}
	s := &Server{srv: grpc.NewServer(grpc.MaxRecvMsgSize(MaxMessage), grpc.InTapHandle(calls.tap)), health: health.NewServer(), ln: ln, done: make(chan error, 1)}
	cepheusv1.RegisterControlServer(s.srv, &service{m: m, refused: o.Refused})
	healthpb.RegisterHealthServer(s.srv, s.health)
	reflection.Register(s.srv)
	s.health.SetServingStatus(cepheusv1.Control_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_NOT_SERVING)
	go s.watch(m)
	go func() { s.done <- s.srv.Serve(ln) }()
	return s
}

// watch keeps the health status of the Control service in step with the
// monitor's readiness until the server stops.
func (s *Server) watch(m *cep.StreamMonitor) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last := false
	for {
		select {
		case <-s.done:
			return
		case <-tick.C:
		}
		if r := m.Ready(); r != last {
			last = r
			st := healthpb.HealthCheckResponse_NOT_SERVING
			if r {
				st = healthpb.HealthCheckResponse_SERVING
			}
			s.health.SetServingStatus(cepheusv1.Control_ServiceDesc.ServiceName, st)
		}
	}
}

// Addr is the address the server listens on, as [Dial] takes it.
func (s *Server) Addr() string {
	if a := s.ln.Addr(); a.Network() == "unix" {
		return "unix:" + a.String()
	}
	return s.ln.Addr().String()
}

// ListenUnix listens on a Unix socket at path, made with mode 0600: the
// kernel lets only its user (and root) connect, which a TCP port, even on
// loopback, does not do (every local user may connect to it). A socket
// left at path by a process that died (a connection to it is refused) is
// replaced; one that a process still serves, or that refuses this user,
// or a file that is no socket, is an error.
func ListenUnix(path string) (net.Listener, error) {
	if st, err := os.Lstat(path); err == nil {
		if st.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("%s exists and is not a socket", path)
		}
		c, err := net.DialTimeout("unix", path, time.Second)
		switch {
		case err == nil:
			c.Close()
			return nil, fmt.Errorf("%s is in use: another process serves on it", path)
		case !errors.Is(err, syscall.ECONNREFUSED):
			// A full backlog (a server stopped, or overloaded) says
			// EAGAIN, another user's socket EACCES: alive, or not
			// ours to remove.
			return nil, fmt.Errorf("%s is a socket that takes no connection now (%w): a server may still own it; remove it if none does", path, err)
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	return listenPrivate(path)
}

// Close stops the server after the calls in progress (up to 5 s).
func (s *Server) Close() {
	s.health.Shutdown()
	stopped := make(chan struct{})
	go func() {
		s.srv.GracefulStop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		s.srv.Stop()
	}
}

// Client is a client of the control API.
type Client struct {
	conn *grpc.ClientConn
	c    cepheusv1.ControlClient
}

// Dial connects to the control API at addr (plaintext): host:port, or
// unix:PATH for a Unix socket.
func Dial(addr string) (*Client, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(MaxMessage), grpc.MaxCallRecvMsgSize(MaxMessage)))
	if err != nil {
		return nil, fmt.Errorf("control: %w", err)
	}
	return &Client{conn: conn, c: cepheusv1.NewControlClient(conn)}, nil
}

// Close disconnects.
func (c *Client) Close() error { return c.conn.Close() }

// Message is what a user should read of the error of one of c's calls:
// the server's own message, without gRPC's "rpc error: code = ... desc ="
// around it; or, when no server answered (nothing listens at the address,
// a name that does not resolve), that none answers there and why.
func (c *Client) Message(err error) string {
	st, ok := status.FromError(err)
	if !ok {
		return err.Error()
	}
	msg := st.Message()
	// A server that answers leaves the connection ready, and an
	// UNAVAILABLE of the server's own (no job running) has its message;
	// one of the connection's, a message of gRPC's transport.
	dial := strings.HasPrefix(msg, "connection error: ") || strings.HasPrefix(msg, "name resolver error: ")
	if st.Code() == codes.Unavailable && dial && c.conn.GetState() != connectivity.Ready {
		why := strings.TrimPrefix(msg, "connection error: desc = ")
		if u, err := strconv.Unquote(why); err == nil {
			why = u
		}
		why = strings.TrimPrefix(why, "transport: Error while dialing: ")
		if strings.HasPrefix(why, "dial unix ") && strings.HasSuffix(why, "permission denied") {
			// A serve answers there, but its socket (mode 0600) is its
			// user's only.
			return fmt.Sprintf("cepheus serve's socket refused the connection (%s): only serve's user (and root) may connect to it; run this as that user", why)
		}
		if strings.Contains(why, "http2: frame too large") {
			// gRPC's words for an HTTP/1.1 server's answer: serve's
			// -http port, or another web server.
			return fmt.Sprintf("an HTTP server answers there, not cepheus serve's control API (%s): is it serve's -http port? Give its -grpc address with -server", why)
		}
		return fmt.Sprintf("no cepheus serve answers there (%s): start it, or give its -grpc address with -server", why)
	}
	if c.Lost(err) {
		return fmt.Sprintf("the connection to cepheus serve was lost during the call (%s): did it stop or crash? Its log says", msg)
	}
	// gRPC's own words here vary with the moment ("context canceled",
	// "stream terminated by RST_STREAM with error code: CANCEL") and
	// name no cause a user knows.
	switch st.Code() {
	case codes.DeadlineExceeded:
		return "cepheus serve did not answer before the call's deadline"
	case codes.Canceled:
		return "the call was cancelled before cepheus serve answered"
	}
	return msg
}

// Unanswered reports whether err, of one of c's calls, is the call's own
// end before the server answered: its deadline, or its context cancelled
// (an interrupt). A deploy, a rollback or a promote the job took goes on
// without its caller: whether it switched is then unknown.
func (c *Client) Unanswered(err error) bool {
	code := status.Code(err)
	return code == codes.DeadlineExceeded || code == codes.Canceled
}

// Lost reports whether err, of one of c's calls, is a connection lost
// while the call was in flight (the server stopped or crashed): an
// UNAVAILABLE of gRPC's transport, "error reading from server: EOF",
// not one of the server's own answers (no job running), which all say
// noJob. What the call did on the server is then unknown: a deploy may
// have switched, at a checkpoint a restart resumes from.
func (c *Client) Lost(err error) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable {
		return false
	}
	msg := st.Message()
	dial := strings.HasPrefix(msg, "connection error: ") || strings.HasPrefix(msg, "name resolver error: ")
	return !dial && !strings.HasPrefix(msg, noJob)
}

// Validate validates a ruleset's source on the server.
func (c *Client) Validate(ctx context.Context, name string, src []byte) (*cepheusv1.ValidateResponse, error) {
	req := &cepheusv1.ValidateRequest{Name: name, Source: src}
	if err := fits(req); err != nil {
		return nil, err
	}
	return retryAborted(ctx, func() (*cepheusv1.ValidateResponse, error) {
		return c.c.Validate(ctx, req)
	})
}

// fits refuses a request larger than MaxMessage before it is sent:
// gRPC's own refusal names a count of bytes and no remedy ("trying to
// send message larger than max (68579194 vs. 67108864)").
func fits(req proto.Message) error {
	if n := proto.Size(req); n > MaxMessage {
		return fmt.Errorf("control: the ruleset's source makes a request of %d bytes, more than the %d MiB (%d bytes) the control API takes: move the ruleset's data out of it (a long list of values is a lookup)", n, MaxMessage>>20, MaxMessage)
	}
	return nil
}

// Status asks the server what the engine does.
func (c *Client) Status(ctx context.Context) (*cepheusv1.StatusResponse, error) {
	return c.c.Status(ctx, &cepheusv1.StatusRequest{})
}

// TriggerCheckpoint asks for a checkpoint and waits for it.
func (c *Client) TriggerCheckpoint(ctx context.Context) (int64, error) {
	r, err := c.c.TriggerCheckpoint(ctx, &cepheusv1.TriggerCheckpointRequest{})
	if err != nil {
		return 0, err
	}
	return r.GetCheckpoint(), nil
}

// Deploy deploys d's source (named d.Name in its problems) on the server,
// with d.DropChanged, d.Shadow and d.From (the server sets the origin, "grpc"),
// and returns once the job runs it, as cep.StreamMonitor.Deploy does: a
// ruleset that does not compile is a *cep.ValidationError with its
// problems; no job a gRPC UNAVAILABLE; a shadow deploy into a job without
// a shadow output a gRPC FAILED_PRECONDITION. A deploy that met another
// one's switch (ABORTED) is sent again until ctx ends.
func (c *Client) Deploy(ctx context.Context, d cep.Deploy) (*cep.DeployResult, error) {
	req := &cepheusv1.DeployRequest{Name: d.Name, Source: d.Source, DropChanged: d.DropChanged, Shadow: d.Shadow, From: d.From}
	if err := fits(req); err != nil {
		return nil, err
	}
	return deployResult(retryAborted(ctx, func() (*cepheusv1.DeployResponse, error) {
		return c.c.Deploy(ctx, req)
	}))
}

// Rollback deploys the most recent previous version on the server, as
// cep.StreamMonitor.Rollback does; none, or o.From not the active
// version, is a gRPC FAILED_PRECONDITION. ABORTED is sent again, as
// Deploy's.
func (c *Client) Rollback(ctx context.Context, o cep.SwitchOptions) (*cep.DeployResult, error) {
	return deployResult(retryAborted(ctx, func() (*cepheusv1.DeployResponse, error) {
		return c.c.Rollback(ctx, &cepheusv1.RollbackRequest{DropChanged: o.DropChanged, From: o.From})
	}))
}

// Promote makes the shadow version on the server the active one, as
// cep.StreamMonitor.Promote does; none is a gRPC FAILED_PRECONDITION.
// ABORTED is sent again, as Deploy's.
func (c *Client) Promote(ctx context.Context, o cep.SwitchOptions) (*cep.DeployResult, error) {
	return deployResult(retryAborted(ctx, func() (*cepheusv1.DeployResponse, error) {
		return c.c.Promote(ctx, &cepheusv1.PromoteRequest{DropChanged: o.DropChanged, From: o.From})
	}))
}

// retryAborted calls call again, every 100 ms, while it answers ABORTED
// (another deploy switching, which takes a checkpoint's time, or
// MaxSourceCalls in progress) and ctx lasts for another attempt (100 ms
// more); then returns its last answer.
func retryAborted[R any](ctx context.Context, call func() (R, error)) (R, error) {
	for {
		r, err := call()
		if status.Code(err) != codes.Aborted {
			return r, err
		}
		if d, ok := ctx.Deadline(); ok && time.Until(d) < 100*time.Millisecond {
			// The next attempt would start at or past the deadline, or
			// so close to it that it ended there (DEADLINE_EXCEEDED,
			// which for a deploy leaves unknown whether the job took
			// it): ABORTED is the answer.
			return r, err
		}
		select {
		case <-ctx.Done():
			return r, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// deployResult is the result of a deploy, a rollback or a promote
// answered r and err: a refused ruleset's problems as a
// *cep.ValidationError.
func deployResult(r *cepheusv1.DeployResponse, err error) (*cep.DeployResult, error) {
	if err != nil {
		return nil, err
	}
	if !r.GetOk() {
		return nil, &cep.ValidationError{Problems: ErrorsOf(r.GetProblems())}
	}
	return &cep.DeployResult{Warnings: ErrorsOf(r.GetWarnings()),
		Ruleset: r.GetRuleset(), Version: r.GetVersion(), Previous: r.GetPrevious(), Checkpoint: r.GetCheckpoint(),
		Kept: r.GetKept(), Changed: r.GetChanged(), Added: r.GetAdded(), Removed: r.GetRemoved(),
		Unchanged: r.GetUnchanged(), Shadow: r.GetShadow(), Took: time.Duration(r.GetTookMs()) * time.Millisecond,
		Watermark: event.Time(r.GetWatermarkUnixMs()),
	}, nil
}

// ErrorsOf is the problems (or warnings) of an answer as the rules
// package's errors, to print.
func ErrorsOf(ps []*cepheusv1.Problem) rules.ErrorList {
	var out rules.ErrorList
	for _, p := range ps {
		out = append(out, &rules.Error{
			Pos: rules.Position{Filename: p.GetFile(), Line: int(p.GetLine()), Column: int(p.GetColumn())}, Msg: p.GetMessage(),
		})
	}
	return out
}

// ListVersions lists the ruleset versions the server keeps, newest first,
// as cep.StreamMonitor.Versions does.
func (c *Client) ListVersions(ctx context.Context) ([]cep.VersionInfo, error) {
	r, err := c.c.ListVersions(ctx, &cepheusv1.ListVersionsRequest{})
	if err != nil {
		return nil, err
	}
	var out []cep.VersionInfo
	for _, v := range r.GetVersions() {
		out = append(out, cep.VersionInfo{
			Ruleset: v.GetRuleset(), Version: v.GetVersion(), State: cep.VersionState(v.GetState()),
			Deployed: time.UnixMilli(v.GetDeployedUnixMs()), Origin: v.GetOrigin(), Rules: v.GetRules(),
		})
	}
	return out, nil
}
