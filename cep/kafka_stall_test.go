package cep

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cepheus-cep/cepheus/runtime/kafka"
)

// TestStallLog: partitions held behind an open transaction are logged in
// one line per look (a warning naming them, how long, and what bounds
// it), and their end in another; no logger, no callback.
func TestStallLog(t *testing.T) {
	if stallLog(nil, "input topic", "in") != nil {
		t.Error("a callback without a logger")
	}
	var lines []string
	f := stallLog(func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }, "repartition topic", "g-repartition-customer_id")
	f([]kafka.Held{{Partition: 2, Offset: 120, For: 15200 * time.Millisecond}})
	f([]kafka.Held{{Partition: 0, Offset: 7, For: 16 * time.Second}, {Partition: 1, Offset: 9, For: 16 * time.Second}, {Partition: 3, Offset: 1, For: 16 * time.Second},
		{Partition: 2, Offset: 120, For: 80 * time.Second, Ended: true}})
	want := []string{
		"warning: repartition topic g-repartition-customer_id partition 2 at offset 120: reading has waited 15s behind a transaction still open",
		"warning: repartition topic g-repartition-customer_id partitions 0, 1 and 3: reading has waited 16s behind a transaction still open",
		"repartition topic g-repartition-customer_id partition 2 at offset 120: the transaction that held reading has ended, after 1m20s or more",
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), strings.Join(lines, "\n"))
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d:\n%s\nwant it to start with\n%s", i, lines[i], w)
		}
	}
	if !strings.Contains(lines[0], "at most its transaction timeout after it began (-transaction-timeout)") {
		t.Errorf("the warning does not say what bounds the wait: %s", lines[0])
	}
}
