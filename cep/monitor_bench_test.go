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
		c := make([]ruleFigure, n)
		wms, lag := map[string]int64{}, map[string]int64{}
		for p := range 8 {
			wms[fmt.Sprintf("events-%d", p)] = int64(p)
			lag[fmt.Sprintf("events-%d", p)] = int64(p)
		}
		b.ReportAllocs()
		for b.Loop() {
			m.publish(e, StreamProgress{}, c, nil, true, 8, wms, lag, nil, nil, nil, 0)
		}
	})
	b.Run("message", func(b *testing.B) {
		h := make([]ruleCounters, n)
		cells := make([]ruleCells, n)
		var count atomic.Int64
		b.ReportAllocs()
		for b.Loop() {
			count.Store(int64(n))
			for i := range cells {
				c, rc := &cells[i], &h[i]
				c.alerts.Store(rc.alerts)
				c.timedOut.Store(rc.timedOut)
				c.overflow.Store(rc.overflow)
				c.partials.Store(rc.overflow)
				c.noKey.Store(rc.noKey)
				c.compared.Store(rc.compared)
				c.overlap.Store(rc.overlap)
			}
		}
	})
}
