package cep

import (
	"errors"
	"strings"
	"testing"
)

// TestTxnSinkTooLarge: an output record over the largest Kafka record is
// refused with ErrOutputTooLarge before anything is produced (the sink's
// producer is never reached), and it is no transaction failure: Stream
// does not restart the job for it.
func TestTxnSinkTooLarge(t *testing.T) {
	s := &txnSink{topic: "alerts", hold: true}
	line := []byte("{\"big\":\"" + strings.Repeat("x", maxOutputRecord) + "\"}\n")
	err := s.WriteKeyed([]byte("k"), line)
	if !errors.Is(err, ErrOutputTooLarge) || isTxnFailure(err) {
		t.Fatalf("a record over the limit: %v, want ErrOutputTooLarge and no restart", err)
	}
	if len(s.held) != 0 {
		t.Fatalf("%d records held, want none", len(s.held))
	}
	if err := s.WriteKeyed([]byte("k"), []byte("{\"small\":1}\n")); err != nil || len(s.held) != 1 {
		t.Fatalf("a small record: %v, %d held", err, len(s.held))
	}
	if err := s.WriteKeyed(nil, []byte("{\"no newline\":1}")); err == nil {
		t.Fatal("a line without its newline was taken")
	}
}

func TestPartitionOf(t *testing.T) {
	for _, c := range []struct {
		name string
		p    int32
		ok   bool
	}{{"in-0", 0, true}, {"in-12", 12, true}, {partitionName("in", 5), 5, true}, {"in-", 0, false}, {"in-x", 0, false}, {"in--1", 0, false}, {"out-3", 0, false}, {"in-3-1", 0, false}} {
		if p, ok := partitionOf("in", c.name); ok != c.ok || ok && p != c.p {
			t.Errorf("partitionOf(in, %q) = %d, %v; want %d, %v", c.name, p, ok, c.p, c.ok)
		}
	}
}

// TestParseTxnMetadata: the metadata the engine writes reads back as
// written, every checkpoint id and valid instance id, final or not; an id
// in any other spelling (a sign, a leading zero, not a decimal) is no
// checkpoint's, and neither is 0.
func TestParseTxnMetadata(t *testing.T) {
	for _, id := range []int64{1, 9, 10, 100, 123456789, 1<<63 - 1} {
		for _, inst := range []string{"0", "a", "final", "eu-west-1.node_7"} {
			for _, final := range []bool{false, true} {
				meta := txnMetadata(id, inst, final)
				if n, i, ok := parseTxnMetadata(meta); !ok || n != id || i != inst || txnFinal(meta) != final {
					t.Errorf("%q: checkpoint %d, instance %q, ok %v, final %v; want %d, %q, true, %v", meta, n, i, ok, txnFinal(meta), id, inst, final)
				}
			}
		}
	}
	if n, i, ok := parseTxnMetadata("cepheus chk=7"); !ok || n != 7 || i != "" {
		t.Errorf(`"cepheus chk=7" (no instance): %d, %q, %v; want 7, "", true`, n, i, ok)
	}
	for _, n := range []string{"+5", "05", "-5", "0", "00", "", " 5", "5 ", "5_0", "0x5", "1e3", "9223372036854775808"} {
		for _, meta := range []string{"cepheus chk=" + n + " inst=a", "cepheus chk=" + n + " inst=a final", "cepheus chk=" + n} {
			if id, _, ok := parseTxnMetadata(meta); ok || txnFinal(meta) {
				t.Errorf("%q: checkpoint %d, ok %v, final %v; want refused", meta, id, ok, txnFinal(meta))
			}
		}
	}
}

// TestCheckInstanceID: an instance id is what a Kafka name may hold; the
// metadata of the offsets a checkpoint commits ends in " final" after it
// for a bounded job's last, so a space would make it ambiguous.
func TestCheckInstanceID(t *testing.T) {
	for _, id := range []string{"0", "a", "eu-west-1.node_7", strings.Repeat("x", 100)} {
		if err := CheckInstanceID(id); err != nil {
			t.Errorf("CheckInstanceID(%q) = %v, want nil", id, err)
		}
		meta := txnMetadata(3, id, true)
		if n, inst, ok := parseTxnMetadata(meta); !ok || n != 3 || inst != id || !txnFinal(meta) {
			t.Errorf("metadata %q: checkpoint %d, instance %q, ok %v, final %v", meta, n, inst, ok, txnFinal(meta))
		}
	}
	for _, id := range []string{"", "a final", "a/b", "é", strings.Repeat("x", 101)} {
		if err := CheckInstanceID(id); err == nil {
			t.Errorf("CheckInstanceID(%q) = nil, want an error", id)
		}
	}
}
