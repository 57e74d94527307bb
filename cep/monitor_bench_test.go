package cep

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkMonitorHotPath measures the work a monitor adds to a live job
// of the whole cards ruleset, in its two places: "publish" is the
// coordinator's hand-over of the figures (every tick, 50 ms; 8 input
// partitions), "message" a subtask's store of its per-rule counters after
// each message (up to 512 events). With the ticks and messages of a job,
// they bound the monitor's share of the CPU (benchmarks/README.md).
func BenchmarkMonitorHotPath(b *testing.B) {
	e, err := New(WithRuleset(loadCardsRuleset(b)))
	if err != nil {
		b.Fatal(err)
	}
	e.plan = e.ownPlan(time.Now())
	n := len(e.rules)
	b.Run("publish", func(b *testing.B) {
		m := NewStreamMonitor()
		c := ruleFigures{alerts: make([]int64, n), timedOut: make([]int64, n), dropped: make([]int64, n), compared: make([]int64, n), overlap: make([]int64, n)}
		wms, lag := map[string]int64{}, map[string]int64{}
		for p := range 8 {
			wms[fmt.Sprintf("events-%d", p)] = int64(p)
			lag[fmt.Sprintf("events-%d", p)] = int64(p)
		}
		b.ReportAllocs()
		for b.Loop() {
			m.publish(e, StreamProgress{}, c, true, 8, wms, lag, nil, nil, 0)
		}
	})
	b.Run("message", func(b *testing.B) {
		h := make([]ruleCounters, n)
		alerts, drops := make([]atomic.Int64, n), make([]atomic.Int64, n)
		compared, overlap := make([]atomic.Int64, n), make([]atomic.Int64, n)
		var count atomic.Int64
		b.ReportAllocs()
		for b.Loop() {
			count.Store(int64(n))
			for i := range alerts {
				alerts[i].Store(h[i].alerts)
				drops[i].Store(h[i].overflow)
				compared[i].Store(h[i].compared)
				overlap[i].Store(h[i].overlap)
			}
		}
	})
}
