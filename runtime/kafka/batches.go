package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// LogBatch is one record batch of a partition as the brokers keep it,
// aborted records and transaction markers included: what a diagnosis of
// a transaction needs, which a consumer (read_committed or not) does not
// show.
type LogBatch struct {
	First, Last   int64 // its first and last offset
	Records       int32
	ProducerID    int64 // -1: not written by an idempotent producer
	ProducerEpoch int16
	Transactional bool
	// Marker is "commit" or "abort" for a transaction's marker (a control
	// batch), "" for a batch of records.
	Marker string
}

func (b LogBatch) String() string {
	what := "records"
	switch {
	case b.Marker != "":
		what = b.Marker + " marker"
	case b.Transactional:
		what = "transactional records"
	}
	return fmt.Sprintf("%d-%d: %d %s of producer %d epoch %d", b.First, b.Last, b.Records, what, b.ProducerID, b.ProducerEpoch)
}

// LogBatches lists the record batches of partition p of topic from its
// start to its high watermark, read from its leader (read_uncommitted, so
// an open transaction's batches too).
func LogBatches(ctx context.Context, c Conn, topic string, p int32) ([]LogBatch, error) {
	cl, err := c.newClient()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("kafka: metadata of %s: %w", topic, err)
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return nil, fmt.Errorf("kafka: metadata of %s: %w", topic, errors.Join(noTopic(topic), td.Err))
	}
	pd, ok := td.Partitions[p]
	if !ok || pd.Err != nil {
		return nil, fmt.Errorf("kafka: %s has no partition %d (%v)", topic, p, pd.Err)
	}
	leader := cl.Broker(int(pd.Leader))
	var out []LogBatch
	for off := int64(0); ; {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 0, 8<<20
		req.IsolationLevel, req.SessionID, req.SessionEpoch = 0, 0, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, td.ID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, off, 8<<20
		rp.CurrentLeaderEpoch, rp.LogStartOffset = -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, leader)
		if err != nil {
			return out, fmt.Errorf("kafka: fetch %s-%d at %d: %w", topic, p, off, err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return out, fmt.Errorf("kafka: fetch %s-%d at %d: %w", topic, p, off, err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return out, fmt.Errorf("kafka: fetch %s-%d at %d: an answer for %d topics", topic, p, off, len(resp.Topics))
		}
		rpart := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(rpart.ErrorCode); err != nil {
			if errors.Is(err, kerr.OffsetOutOfRange) && off < rpart.LogStartOffset {
				off = rpart.LogStartOffset // records deleted before it
				continue
			}
			return out, fmt.Errorf("kafka: fetch %s-%d at %d: %w", topic, p, off, err)
		}
		read, next, err := parseBatches(rpart.RecordBatches, off)
		out = append(out, read...)
		switch {
		case err != nil:
			return out, fmt.Errorf("kafka: %s-%d at %d: %w", topic, p, off, err)
		case next >= rpart.HighWatermark:
			return out, nil
		case next == off:
			return out, fmt.Errorf("kafka: %s-%d: no whole batch at offset %d, below the high watermark %d", topic, p, off, rpart.HighWatermark)
		}
		off = next
	}
}

// parseBatches reads the whole batches of a fetch answer (a last one cut
// short is left for the next fetch) and returns them with the offset
// after them (from when there is none).
func parseBatches(b []byte, from int64) ([]LogBatch, int64, error) {
	var out []LogBatch
	next := from
	for len(b) >= 12 {
		size := 12 + int(int32(binary.BigEndian.Uint32(b[8:12])))
		if size < 12 || size > len(b) {
			break
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b[:size]); err != nil {
			return out, next, fmt.Errorf("a record batch at offset %d: %w", int64(binary.BigEndian.Uint64(b)), err)
		}
		b = b[size:]
		last := rb.FirstOffset + int64(rb.LastOffsetDelta)
		if last < next {
			continue // a batch before the offset asked for
		}
		bt := LogBatch{First: rb.FirstOffset, Last: last, Records: rb.NumRecords, ProducerID: rb.ProducerID, ProducerEpoch: rb.ProducerEpoch, Transactional: rb.Attributes&0x10 != 0}
		if rb.Attributes&0x20 != 0 {
			var r kmsg.Record
			if err := r.ReadFrom(rb.Records); err != nil || len(r.Key) < 4 {
				return out, next, fmt.Errorf("the control batch at offset %d: its record unreadable (%v)", rb.FirstOffset, err)
			}
			switch binary.BigEndian.Uint16(r.Key[2:4]) {
			case 0:
				bt.Marker = "abort"
			case 1:
				bt.Marker = "commit"
			default:
				bt.Marker = fmt.Sprintf("control type %d", binary.BigEndian.Uint16(r.Key[2:4]))
			}
		}
		out = append(out, bt)
		next = last + 1
	}
	return out, next, nil
}

// DescribeTxn describes, for a diagnosis, the transaction of
// transactional id txnID as its coordinator holds it (state, producer id
// and epoch, partitions) and every transaction the partitions of topics
// hold open (by producer id and epoch, from its first offset): a
// partition holding one its producer's coordinator does not list is a
// hanging transaction, which a later marker of that producer would end
// with its own.
func DescribeTxn(ctx context.Context, c Conn, txnID string, topics ...string) string {
	cl, err := c.newClient()
	if err != nil {
		return err.Error()
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var b strings.Builder
	ds, err := adm.DescribeTransactions(ctx, txnID)
	switch d, ok := ds[txnID]; {
	case err != nil:
		fmt.Fprintf(&b, "transaction %s: %v", txnID, err)
	case !ok || d.Err != nil:
		fmt.Fprintf(&b, "transaction %s: not described (%v)", txnID, d.Err)
	default:
		var parts []string
		for _, tp := range d.Topics.Sorted() {
			for _, p := range tp.Partitions {
				parts = append(parts, fmt.Sprintf("%s-%d", tp.Topic, p))
			}
		}
		fmt.Fprintf(&b, "transaction %s: %s, producer %d epoch %d, partitions %v", txnID, d.State, d.ProducerID, d.ProducerEpoch, parts)
	}
	set := kadm.TopicsSet{}
	for _, t := range topics {
		set.Add(t)
	}
	ps, err := adm.DescribeProducers(ctx, set)
	if err != nil {
		fmt.Fprintf(&b, "; producers of %v: %v", topics, err)
	}
	open := 0
	for _, p := range ps.SortedProducers() {
		if p.CurrentTxnStartOffset >= 0 {
			open++
			fmt.Fprintf(&b, "; %s-%d holds a transaction open from offset %d, producer %d epoch %d", p.Topic, p.Partition, p.CurrentTxnStartOffset, p.ProducerID, p.ProducerEpoch)
		}
	}
	if open == 0 {
		fmt.Fprintf(&b, "; no partition of %v holds a transaction open", topics)
	}
	return b.String()
}
