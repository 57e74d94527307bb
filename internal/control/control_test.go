package control

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/cep"
	"github.com/cepheus-cep/cepheus/internal/control/cepheusv1"
	"github.com/cepheus-cep/cepheus/rules"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
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

// TestControl serves the control API over a live job: health says
// NOT_SERVING for the Control service until the job reads, then SERVING;
// Status reports the job's figures and rules; TriggerCheckpoint returns a
// checkpoint newer than the latest; Validate returns a good ruleset's
// version and a bad one's problems with their lines and columns;
// reflection lists the services.
func TestControl(t *testing.T) {
	dir := t.TempDir()
	rs, err := rules.Load("c.cep", []byte(testRules))
	if err != nil {
		t.Fatal(err)
	}
	e, err := cep.New(cep.WithRuleset(rs))
	if err != nil {
		t.Fatal(err)
	}
	input := filepath.Join(dir, "events.jsonl")
	if err := os.WriteFile(input, []byte(events(0, 40)), 0o644); err != nil {
		t.Fatal(err)
	}
	m := cep.NewStreamMonitor()
	srv, err := Serve("127.0.0.1:0", m)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
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
	c, err := Dial(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	jctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := e.Stream(jctx, cep.StreamConfig{
			Events: input, Follow: true, PollInterval: 10 * time.Millisecond, StateDir: filepath.Join(dir, "state"),
			AlertsDir: filepath.Join(dir, "alerts"), CheckpointInterval: time.Hour, Monitor: m,
		})
		done <- err
	}()
	var st *cepheusv1.StatusResponse
	for deadline := time.Now().Add(20 * time.Second); ; {
		if st, err = c.Status(ctx); err != nil {
			t.Fatal(err)
		}
		if st.GetReady() && st.GetRecords() == 40 && healthOf() == healthpb.HealthCheckResponse_SERVING {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready with 40 records after 20s: %v, health %v", st, healthOf())
		}
		time.Sleep(20 * time.Millisecond)
	}
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
	if _, err := c.TriggerCheckpoint(ctx); err == nil {
		t.Error("TriggerCheckpoint without a job: no error")
	}
}
