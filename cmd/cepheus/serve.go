package main

import (
	"context"
	"io"

	"github.com/cepheus-cep/cepheus/cep"
	"github.com/cepheus-cep/cepheus/internal/metrics"
)

var serveCommand = &command{
	name:  "serve",
	usage: "cepheus serve [the flags of cepheus run] [-http ADDR]",
	help: `Serve runs a ruleset as a live engine, exactly as cepheus run does (every
flag of run applies: files or Kafka, checkpoints, exactly-once outputs,
scale-out), and serves its operations surface over HTTP on -http
(default localhost:9464):

  /metrics   Prometheus metrics, prefix cepheus_ (docs/operations.md,
             "Metrics"): records, events, dead letters, late events,
             alerts by rule and severity, keys and buffered events,
             queued events (backpressure), watermark and its lag,
             checkpoint durations and failures, the ruleset's version;
             with the Go runtime's and the process's
  /healthz   200 while the process serves
  /readyz    200 once the job has restored its state and reads its
             input (in Kafka mode, its share of the group's
             partitions); 503 before, and between two jobs of a
             rebalance

SIGINT or SIGTERM stops it as run: a final checkpoint, then exit 0.
Not yet: the gRPC control API and hot-loading of rulesets.`,
}

func init() {
	serveCommand.run = func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		return runStream(ctx, serveCommand, args, stdout, stderr)
	}
}

// serveHTTP serves the metrics, health and readiness of m on addr.
func serveHTTP(addr string, m *cep.StreamMonitor) (*metrics.Server, error) {
	return metrics.Serve(addr, m)
}
