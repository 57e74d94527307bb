package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// WriteLeftOpen writes one transactional record (key, value) to partition
// p of topic as the producer of transactional id txnID, at its current
// epoch, without adding the partition to a transaction: a transaction
// left open in the partition, which no marker of its coordinator will
// end, as the brokers leave one only by fault. It is for the tests of the
// check before each commit ([ErrTxnLeftOpen]): only a broker that does
// not verify a transaction's partitions with its coordinator takes it
// (transaction version 1 with transaction.partition.verification.enable
// false); others refuse it. The producer must have no transaction open.
// It returns the record's offset.
func WriteLeftOpen(ctx context.Context, c Conn, txnID, topic string, p int32, key, value []byte) (int64, error) {
	cl, err := c.newClient(kgo.MaxVersions(kversion.V3_0_0())) // produce without transaction version 2
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var d kadm.DescribedTransaction
	for {
		ds, err := adm.DescribeTransactions(ctx, txnID)
		var ok bool
		d, ok = ds[txnID]
		switch {
		case err != nil:
			return 0, fmt.Errorf("kafka: describe transaction %s: %w", txnID, err)
		case !ok || d.Err != nil:
			return 0, fmt.Errorf("kafka: describe transaction %s: %v", txnID, d.Err)
		case strings.HasPrefix(d.State, "Prepare"):
			// A commit or abort writing its markers: wait for its end.
			select {
			case <-ctx.Done():
				return 0, fmt.Errorf("kafka: transaction %s still %s: %w", txnID, d.State, ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
			continue
		case d.State != "CompleteCommit" && d.State != "CompleteAbort" && d.State != "Empty":
			return 0, fmt.Errorf("kafka: transaction %s is %s: want none open", txnID, d.State)
		}
		break
	}
	// The partition takes the producer's next sequence at its epoch, 0
	// at another.
	seq := int32(0)
	ps, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: {p: {}}})
	if err != nil {
		return 0, fmt.Errorf("kafka: producers of %s-%d: %w", topic, p, err)
	}
	ps.EachProducer(func(dp kadm.DescribedProducer) {
		if dp.Partition == p && dp.ProducerID == d.ProducerID && dp.ProducerEpoch == d.ProducerEpoch {
			seq = dp.LastSequence + 1
		}
	})
	rec := kmsg.Record{Key: key, Value: value}
	body := rec.AppendTo(nil)[1:] // without its length (0, one byte)
	rec.Length = int32(len(body))
	now := time.Now().UnixMilli()
	batch := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: 0x10, // transactional
		FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: d.ProducerID, ProducerEpoch: d.ProducerEpoch, FirstSequence: seq,
		NumRecords: 1, Records: rec.AppendTo(nil),
	}
	raw := batch.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))                                          // the length after it
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli))) // from the attributes on
	req := kmsg.NewPtrProduceRequest()
	req.TransactionID, req.Acks, req.TimeoutMillis = &txnID, -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = p, raw
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("kafka: metadata of %s: %w", topic, err)
	}
	pd, ok := md.Topics[topic].Partitions[p]
	if !ok || pd.Err != nil {
		return 0, fmt.Errorf("kafka: %s has no partition %d (%v)", topic, p, pd.Err)
	}
	resp, err := req.RequestWith(ctx, cl.Broker(int(pd.Leader)))
	if err == nil && (len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1) {
		err = errors.New("an answer for no partition")
	}
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].Partitions[0].ErrorCode)
	}
	if err != nil {
		return 0, fmt.Errorf("kafka: a record of producer %d epoch %d (sequence %d) left open in %s-%d: %w", d.ProducerID, d.ProducerEpoch, seq, topic, p, err)
	}
	return resp.Topics[0].Partitions[0].BaseOffset, nil
}
