// Package kafka is the Kafka side of Cepheus, on franz-go: today the
// transport of JSON lines between files and topics ([Produce], [Consume]),
// which cepheus produce and cepheus consume run through package cep, and
// [Source], the partitioned reader of a topic that cepheus run will read
// its input with (offsets as positions, read_committed, bounded mode). Its
// wiring into cepheus run and the exactly-once alert sink come next
// (issue 12).
//
// # Topics
//
// Every topic the project creates has unlimited retention (retention.ms=-1):
// test data is dated months before today's clock, and time-based retention
// would delete it at once. A topic is created with the broker's default
// replication factor; creation is idempotent (a topic that exists, or that
// another client creates meanwhile, is used as it is).
//
// # Records
//
// A record's value is one JSON line without its line end. Its key is the
// value of one top-level field of the line ([ProduceConfig.KeyField]); a line
// without that field gets a null key, which Kafka's default partitioner
// spreads over the partitions, while a keyed record goes to the partition
// murmur2(key) mod partitions, as the Java client computes it. Reading is
// read_committed by default: records of aborted and still open transactions
// are never shown ([ConsumeConfig.ReadUncommitted]).
//
// # Tests
//
// Unit tests run on kfake, franz-go's in-process fake cluster; the same
// tests run against a real broker when CEPHEUS_KAFKA_BROKERS names one
// (make test starts one with scripts/kafka.sh). Under CI a missing broker
// fails those tests, it never skips them.
//
// # Imports
//
// Package kafka is the only package of ours that may import franz-go
// (internal/lint enforces it). Of ours it may import event, runtime and
// runtime/state; today it imports none of them.
package kafka
