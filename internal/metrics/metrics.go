// Package metrics exports what a running job of cep.Engine.Stream does as
// Prometheus metrics (github.com/prometheus/client_golang; this is the one
// package that imports it), and serves them over HTTP beside the health
// and readiness checks: /metrics, /healthz, /readyz (docs/operations.md,
// "cepheus serve: metrics, health, readiness").
//
// The exporter reads a cep.StreamMonitor when it is scraped: the job
// publishes its figures into the monitor on its own timer, so the
// metrics cost nothing per event. No event value (a key, a card number)
// is ever a label: the labels are rule, lookup and aggregate names,
// severities, input partitions, the ruleset's name and version, and
// fixed words (outcome, result).
package metrics

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"time"

	"github.com/cepheus-cep/cepheus/cep"
	"github.com/cepheus-cep/cepheus/event"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Names are the metrics the exporter exports (without the process and
// Go runtime collectors'), for the dashboard's test.
var Names = []string{
	"cepheus_records_total", "cepheus_events_decoded_total", "cepheus_dead_letters_total",
	"cepheus_late_events_total", "cepheus_alerts_total", "cepheus_rule_alerts_total",
	"cepheus_keys", "cepheus_buffered_events", "cepheus_queued_events",
	"cepheus_watermark_seconds", "cepheus_watermark_lag_seconds",
	"cepheus_checkpoint_duration_seconds", "cepheus_checkpoint_failures_total", "cepheus_checkpoints_skipped_total",
	"cepheus_last_checkpoint", "cepheus_state_durable_timestamp_seconds", "cepheus_checkpoint_stall_seconds", "cepheus_partitions",
	"cepheus_ready", "cepheus_ruleset_info", "cepheus_rule_condition_errors_total", "cepheus_rule_dropped_total",
	"cepheus_rule_emit_errors_total", "cepheus_rule_events_without_key_total",
	"cepheus_partition_watermark_seconds", "cepheus_partition_idle", "cepheus_kafka_transactions_total", "cepheus_kafka_consumer_lag_records", "cepheus_input_unread_bytes",
	"cepheus_partial_matches", "cepheus_state_bytes", "cepheus_checkpoint_bytes", "cepheus_ruleset_switches_total",
	"cepheus_rules_draining", "cepheus_shadow_ruleset_info", "cepheus_shadow_rule_alerts_total", "cepheus_shadow_rule_active_alerts_total",
	"cepheus_shadow_rule_overlap_total",
	"cepheus_lookup_keys_total", "cepheus_lookup_not_found_total", "cepheus_lookup_requests_total",
	"cepheus_lookup_timeouts_total", "cepheus_lookup_failures_total", "cepheus_lookup_unreadable_total",
	"cepheus_lookup_events_total",
	"cepheus_lookup_request_duration_seconds", "cepheus_lookup_event_delay_seconds",
	"cepheus_aggregate_keys", "cepheus_aggregate_dropped_total", "cepheus_aggregate_held_events", "cepheus_aggregate_hot_keys",
}

// collector is the prometheus.Collector of a monitor.
type collector struct {
	m     *cep.StreamMonitor
	descs map[string]*prometheus.Desc
}

func newCollector(m *cep.StreamMonitor) *collector {
	c := &collector{m: m, descs: map[string]*prometheus.Desc{}}
	d := func(name, help string, labels ...string) {
		c.descs[name] = prometheus.NewDesc(name, help, labels, nil)
	}
	d("cepheus_records_total", "Input records read (events and malformed lines), cumulative over the runs of the state.")
	d("cepheus_events_decoded_total", "Input records decoded into events.")
	d("cepheus_dead_letters_total", "Input records sent to the dead letters (malformed, or too far ahead).")
	d("cepheus_late_events_total", "Events behind the watermark, sent to the late output.")
	d("cepheus_alerts_total", "Alerts raised, all rules.")
	d("cepheus_rule_alerts_total", "Alerts of one rule and severity (a timed-out partial match's: its timeout block's) in this process (from the checkpoint it restored), over its versions; a rule no longer active keeps its last value.", "rule", "severity")
	d("cepheus_keys", "Keys holding state at the latest checkpoint.")
	d("cepheus_buffered_events", "Events the keys buffer at the latest checkpoint.")
	d("cepheus_queued_events", "Events routed to the subtasks and not yet processed (backpressure).")
	d("cepheus_watermark_seconds", "The job's watermark, as Unix seconds.")
	d("cepheus_watermark_lag_seconds", "The largest event time read minus the watermark.")
	d("cepheus_checkpoint_duration_seconds", "Time from a checkpoint's barrier to its commit.")
	d("cepheus_checkpoint_failures_total", "Checkpoints aborted or whose commit failed.")
	d("cepheus_checkpoints_skipped_total", "Checkpoints not taken because nothing changed since the latest: an idle job checkpoints every 10 minutes.")
	d("cepheus_last_checkpoint", "The id of the latest complete checkpoint.")
	d("cepheus_state_durable_timestamp_seconds", "Unix time at which the state was last known to be in a complete checkpoint: one completed (as of its barrier: what was read after it is in none), one skipped because nothing changed since the latest (an idle job skips them for up to 10 minutes), or a job's start on its restored state; in Kafka mode, an instance reading no partition holds none: its last look at the group. time() minus it is how much of the input's time a crash now would read again.")
	d("cepheus_checkpoint_stall_seconds", "The longest time a subtask stopped processing for the latest checkpoint.")
	d("cepheus_partitions", "Input (and repartition) partitions the job reads.")
	d("cepheus_ready", "1 when a job has restored its state and reads its input.")
	d("cepheus_ruleset_info", "The ruleset running (always 1).", "ruleset", "version")
	d("cepheus_rule_condition_errors_total", "Condition evaluations of one rule that failed at run time (counted as false).", "rule")
	d("cepheus_rule_dropped_total", "Events or partial matches of one rule dropped at the limits.", "rule")
	d("cepheus_rule_emit_errors_total", "Emit fields of one rule's alerts that failed at run time (each null in its alert).", "rule")
	d("cepheus_rule_events_without_key_total", "Events one rule skipped for lacking one of its key fields (missing or null).", "rule")
	d("cepheus_partition_watermark_seconds", "The watermark of one input partition (a file, or TOPIC-P), as Unix seconds.", "partition")
	d("cepheus_partition_idle", "1 while an input partition does not hold the watermark back: idle (no record for -idle-timeout; in Kafka mode, caught up) or finished (a bounded input read to its end); 0 while it does.", "partition")
	d("cepheus_kafka_transactions_total", "Checkpoint transactions of a Kafka job, by outcome.", "outcome")
	d("cepheus_kafka_consumer_lag_records", "Records of a Kafka partition (input or repartition) past the job's position, as its latest fetch saw them.", "partition")
	d("cepheus_input_unread_bytes", "Bytes of a followed input file past the reader's position, as its latest batch saw them: the file's backlog.", "partition")
	d("cepheus_partial_matches", "Partial matches the rules hold, at the latest checkpoint.")
	d("cepheus_state_bytes", "Size of the subtasks' state stores (memory: the records; Pebble: the files), at the latest checkpoint.")
	d("cepheus_checkpoint_bytes", "Bytes of state records the latest checkpoint wrote (the keys changed since the one before).")
	d("cepheus_ruleset_switches_total", "Switches of the running job's ruleset version (deploys, rollbacks, promotes) in this process.")
	d("cepheus_rules_draining", "Rules of earlier versions draining: going on with their partial matches of before a switch until the watermark passes their window (cepheus status names them).")
	d("cepheus_shadow_ruleset_info", "The shadow ruleset version running beside the active one (always 1; absent without one).", "version")
	d("cepheus_shadow_rule_alerts_total", "Alerts of the shadow rules of one name (to the shadow output), over the shadow versions of this process.", "rule")
	d("cepheus_shadow_rule_active_alerts_total", "Alerts of the active rule of a shadow rule's name while a shadow rule of that name ran, in this process.", "rule")
	d("cepheus_shadow_rule_overlap_total", "Matches both the shadow rule and the active rule of its name raised (the same events at the same key), in this process.", "rule")
	d("cepheus_lookup_keys_total", "Keys a lookup looked up (distinct keys of a batch), by where they came from: the cache (hit) or the source (miss).", "lookup", "result")
	d("cepheus_lookup_not_found_total", "Keys a lookup's source had no record for (their events get the defaults).", "lookup")
	d("cepheus_lookup_requests_total", "Requests a lookup sent to its source, retries included.", "lookup")
	d("cepheus_lookup_timeouts_total", "Requests of a lookup that hit their timeout.", "lookup")
	d("cepheus_lookup_failures_total", "Attempts of a lookup's requests that failed (timeouts included), before any retry.", "lookup")
	d("cepheus_lookup_unreadable_total", "Keys whose record a lookup's source answered but could not read (a value not of its field's kind, a Redis key of another type): their events get the failure policy.", "lookup")
	d("cepheus_lookup_events_total", "Events whose lookup failed for good (or whose record did not read), by what the policy did: defaulted (fail open) or rejected (fail closed: dead letters).", "lookup", "outcome")
	d("cepheus_lookup_request_duration_seconds", "Time a lookup's request took, answered or failed.", "lookup")
	d("cepheus_aggregate_keys", "Keys whose window of a velocity aggregate holds at least one event at the watermark.", "aggregate")
	d("cepheus_aggregate_dropped_total", "Events a velocity aggregate forgot at the bound of a key's window (the key's values then undercount).", "aggregate")
	d("cepheus_aggregate_held_events", "Events the velocity aggregates hold until the watermark passes them.")
	d("cepheus_aggregate_hot_keys", "Keys of a velocity aggregate with a large share of the events recently (more than 20% of a watermark's release, at least 64, in the last minute of event time): skew.", "aggregate")
	d("cepheus_lookup_event_delay_seconds", "Time an event waited for a lookup (its batch's call: cache, requests, retries): what the lookup adds to its latency.", "lookup")
	return c
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.m.Snapshot()
	p := s.Progress
	counter := func(name string, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.descs[name], prometheus.CounterValue, v, labels...)
	}
	gauge := func(name string, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(c.descs[name], prometheus.GaugeValue, v, labels...)
	}
	counter("cepheus_records_total", float64(p.Records))
	counter("cepheus_events_decoded_total", float64(p.Decoded))
	counter("cepheus_dead_letters_total", float64(p.Dead))
	counter("cepheus_late_events_total", float64(p.Late))
	counter("cepheus_alerts_total", float64(p.Alerts))
	// The active version's rules, then the others counted in this process
	// (a removed rule, a former severity), which keep their last values:
	// a rule's counters never go down while the process runs. Condition
	// errors, emit errors, drops and events without the key are by rule
	// name alone, over its severities.
	// An alert counts under its own severity: a timed-out partial match's
	// under its rule's timeout block's, so one rule's alerts of one
	// severity may come from several counts (sums of counters that never
	// go down).
	var names []string
	byName := map[string]cep.RuleCount{}
	type bySeverity struct{ rule, severity string }
	var severities []bySeverity
	alerts := map[bySeverity]int64{}
	addAlerts := func(rule, severity string, n int64) {
		k := bySeverity{rule, severity}
		if _, ok := alerts[k]; !ok {
			severities = append(severities, k)
		}
		alerts[k] += n
	}
	for _, rs := range [][]cep.RuleCount{s.Rules, s.Former} {
		for _, r := range rs {
			addAlerts(r.Rule, r.Severity, r.Alerts-r.TimedOut)
			if r.TimeoutSeverity != "" {
				addAlerts(r.Rule, r.TimeoutSeverity, r.TimedOut)
			}
			n, ok := byName[r.Rule]
			if !ok {
				names = append(names, r.Rule)
			}
			n.ConditionErrors += r.ConditionErrors
			n.EmitErrors += r.EmitErrors
			n.Dropped += r.Dropped
			n.NoKey += r.NoKey
			byName[r.Rule] = n
		}
	}
	for _, k := range severities {
		counter("cepheus_rule_alerts_total", float64(alerts[k]), k.rule, k.severity)
	}
	for _, name := range names {
		counter("cepheus_rule_condition_errors_total", float64(byName[name].ConditionErrors), name)
		counter("cepheus_rule_dropped_total", float64(byName[name].Dropped), name)
		counter("cepheus_rule_emit_errors_total", float64(byName[name].EmitErrors), name)
		counter("cepheus_rule_events_without_key_total", float64(byName[name].NoKey), name)
	}
	for name, wm := range s.PartitionWatermarks {
		gauge("cepheus_partition_watermark_seconds", watermarkSeconds(event.Watermark(wm)), name)
		idle := 0.0
		if s.IdlePartitions[name] {
			idle = 1
		}
		gauge("cepheus_partition_idle", idle, name)
	}
	for name, n := range s.KafkaLag {
		gauge("cepheus_kafka_consumer_lag_records", float64(n), name)
	}
	for name, n := range s.FileUnread {
		gauge("cepheus_input_unread_bytes", float64(n), name)
	}
	counter("cepheus_kafka_transactions_total", float64(s.KafkaCommits), "committed")
	counter("cepheus_kafka_transactions_total", float64(s.KafkaAborts), "failed")
	gauge("cepheus_keys", float64(p.Keys))
	gauge("cepheus_partial_matches", float64(p.PartialMatches))
	gauge("cepheus_state_bytes", float64(p.StateBytes))
	gauge("cepheus_checkpoint_bytes", float64(p.CheckpointBytes))
	counter("cepheus_ruleset_switches_total", float64(s.Switches))
	gauge("cepheus_rules_draining", float64(len(s.Draining)))
	if s.ShadowVersion != "" {
		gauge("cepheus_shadow_ruleset_info", 1, s.ShadowVersion)
	}
	for _, r := range s.ShadowTotals {
		counter("cepheus_shadow_rule_alerts_total", float64(r.Shadow), r.Rule)
		counter("cepheus_shadow_rule_active_alerts_total", float64(r.Active), r.Rule)
		counter("cepheus_shadow_rule_overlap_total", float64(r.Overlap), r.Rule)
	}
	for _, l := range s.Lookups {
		counter("cepheus_lookup_keys_total", float64(l.Hits), l.Name, "hit")
		counter("cepheus_lookup_keys_total", float64(l.Misses), l.Name, "miss")
		counter("cepheus_lookup_not_found_total", float64(l.NotFound), l.Name)
		counter("cepheus_lookup_requests_total", float64(l.Requests), l.Name)
		counter("cepheus_lookup_timeouts_total", float64(l.Timeouts), l.Name)
		counter("cepheus_lookup_failures_total", float64(l.Failures), l.Name)
		counter("cepheus_lookup_unreadable_total", float64(l.Unreadable), l.Name)
		counter("cepheus_lookup_events_total", float64(l.Defaulted), l.Name, "defaulted")
		counter("cepheus_lookup_events_total", float64(l.Rejected), l.Name, "rejected")
		histogram := func(name string, h enrichHistogram) {
			buckets := make(map[float64]uint64, len(h.Bounds))
			var n uint64
			for i, b := range h.Bounds {
				n += h.Counts[i]
				buckets[b] = n
			}
			ch <- prometheus.MustNewConstHistogram(c.descs[name], h.Count, h.Sum, buckets, l.Name)
		}
		histogram("cepheus_lookup_request_duration_seconds", l.Latency)
		histogram("cepheus_lookup_event_delay_seconds", l.Delay)
	}
	for _, a := range s.Aggregates {
		gauge("cepheus_aggregate_keys", float64(a.Keys), a.Name)
		counter("cepheus_aggregate_dropped_total", float64(a.Dropped), a.Name)
		gauge("cepheus_aggregate_hot_keys", float64(a.HotKeys), a.Name)
	}
	if len(s.Aggregates) > 0 {
		gauge("cepheus_aggregate_held_events", float64(s.AggregateHeld))
	}
	gauge("cepheus_buffered_events", float64(p.Buffered))
	gauge("cepheus_queued_events", float64(p.Queued))
	// The watermark: -Inf before the first, +Inf at the end of a bounded
	// input (its lag is then 0).
	gauge("cepheus_watermark_seconds", watermarkSeconds(p.Watermark))
	lag := 0.0
	if wm := p.Watermark; wm > event.MinTime && wm < event.MaxTime {
		lag = max(0, float64(p.MaxEventTime-wm)/1000)
	}
	gauge("cepheus_watermark_lag_seconds", lag)
	buckets := map[float64]uint64{}
	var n uint64
	for i, b := range cep.CheckpointBucketBounds[:len(cep.CheckpointBucketBounds)-1] {
		n += s.CheckpointBuckets[i]
		buckets[b.Seconds()] = n
	}
	n += s.CheckpointBuckets[len(s.CheckpointBuckets)-1]
	ch <- prometheus.MustNewConstHistogram(c.descs["cepheus_checkpoint_duration_seconds"], n, s.CheckpointSum.Seconds(), buckets)
	counter("cepheus_checkpoint_failures_total", float64(s.CheckpointFailures))
	counter("cepheus_checkpoints_skipped_total", float64(s.CheckpointsSkipped))
	gauge("cepheus_last_checkpoint", float64(p.LastCheckpoint))
	if !s.DurableAt.IsZero() {
		gauge("cepheus_state_durable_timestamp_seconds", float64(s.DurableAt.UnixMilli())/1000)
	}
	gauge("cepheus_checkpoint_stall_seconds", p.LastStall.Seconds())
	gauge("cepheus_partitions", float64(s.Partitions))
	ready := 0.0
	if s.Ready {
		ready = 1
	}
	gauge("cepheus_ready", ready)
	if s.Ruleset != "" {
		gauge("cepheus_ruleset_info", 1, s.Ruleset, s.RulesetVersion)
	}
}

// enrichHistogram is a lookup's histogram as cep.LookupStats carries it.
type enrichHistogram = struct {
	Bounds []float64
	Counts []uint64
	Sum    float64
	Count  uint64
}

// watermarkSeconds is a watermark as Unix seconds: -Inf before the
// first, +Inf at the end of a bounded input.
func watermarkSeconds(wm event.Watermark) float64 {
	switch {
	case wm <= event.MinTime:
		return math.Inf(-1)
	case wm >= event.MaxTime:
		return math.Inf(1)
	}
	return float64(wm) / 1000
}

// Handler returns the HTTP handler of /metrics (the monitor's metrics,
// with the process's and the Go runtime's), /healthz (200 while the
// process serves) and /readyz (200 once a job restored its state and
// reads its input, 503 otherwise).
func Handler(m *cep.StreamMonitor) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(m), collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !m.Ready() {
			http.Error(w, "not ready: restoring, or between two jobs of a rebalance", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	return mux
}

// Server serves Handler on a listener until Close.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan error
}

// Serve listens on addr (host:port; port 0 picks one) and serves
// Handler(m) in the background.
func Serve(addr string, m *cep.StreamMonitor) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	s := &Server{srv: &http.Server{Handler: Handler(m), ReadHeaderTimeout: 10 * time.Second}, ln: ln, done: make(chan error, 1)}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server, letting requests in progress end (up to 5 s).
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if serr := <-s.done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}
