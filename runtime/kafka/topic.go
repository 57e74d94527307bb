package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrNoTopic is returned (wrapped, with the topic's name) by a call that
// reads a topic that does not exist. Use errors.Is(err, ErrNoTopic).
var ErrNoTopic = errors.New("kafka: no such topic")

// noTopic is the error of every call that finds topic missing: one
// wording wherever a command meets it.
func noTopic(topic string) error { return fmt.Errorf("topic %s: %w", topic, ErrNoTopic) }

// ErrPartitionCount is returned (wrapped, with both counts) when a topic
// exists with another partition count than the one asked for: keyed records
// would go to other partitions than a topic of the asked count sends them
// to. Use errors.Is(err, ErrPartitionCount).
var ErrPartitionCount = errors.New("kafka: partition count differs")

// metadataMinAge is the client option of every client here: a metadata
// answer is reused for at most 100 ms (franz-go's default is 5 s), so a
// topic just created is seen at once, not 5 s later. Metadata is still
// fetched only when needed.
var metadataMinAge = kgo.MetadataMinAge(100 * time.Millisecond)

// topicConfigs are the configs of every topic the project creates.
var topicConfigs = map[string]*string{"retention.ms": new("-1")}

// ensureTopic creates topic when it is missing, with partitions partitions
// (0: the broker's num.partitions), the broker's default replication factor
// and topicConfigs, and waits until every partition has a leader. A topic
// that exists, or that another client creates meanwhile, is used as it is,
// unless partitions is not 0 and differs from its count (ErrPartitionCount).
// It returns whether it created the topic and the topic's partition count.
func ensureTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int) (created bool, n int, err error) {
	return ensureTopicWith(ctx, adm, topic, partitions, topicConfigs)
}

// ensureTopicWith is ensureTopic creating the topic with configs.
func ensureTopicWith(ctx context.Context, adm *kadm.Client, topic string, partitions int, configs map[string]*string) (created bool, n int, err error) {
	n, err = partitionCount(ctx, adm, topic)
	if errors.Is(err, ErrNoTopic) {
		p := int32(partitions)
		if p == 0 {
			p = -1 // the broker's default
		}
		_, err = adm.CreateTopic(ctx, p, -1, configs, topic)
		switch {
		case err == nil:
			created = true
		case errors.Is(err, kerr.TopicAlreadyExists):
			// Another client created it meanwhile.
		default:
			return false, 0, fmt.Errorf("kafka: create topic %s: %w", topic, err)
		}
		n, err = waitForLeaders(ctx, adm, topic)
	}
	if err != nil {
		return false, 0, err
	}
	if partitions != 0 && n != partitions {
		have := fmt.Sprintf("%d partitions", n)
		if n == 1 {
			have = "1 partition"
		}
		return false, n, fmt.Errorf("topic %s has %s, not %d: %w", topic, have, partitions, ErrPartitionCount)
	}
	return created, n, nil
}

// partitionCount returns the number of partitions of topic, or ErrNoTopic.
func partitionCount(ctx context.Context, adm *kadm.Client, topic string) (int, error) {
	details, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("kafka: metadata of topic %s: %w", topic, err)
	}
	d, ok := details[topic]
	switch {
	case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
		return 0, noTopic(topic)
	case d.Err != nil:
		return 0, fmt.Errorf("kafka: metadata of topic %s: %w", topic, d.Err)
	}
	return len(d.Partitions), nil
}

// waitForLeaders waits until the metadata shows topic with a leader for
// every partition (a topic just created takes a moment), and returns its
// partition count. It gives up after 30 s.
func waitForLeaders(ctx context.Context, adm *kadm.Client, topic string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		details, err := adm.ListTopics(ctx, topic)
		if err == nil {
			if d, ok := details[topic]; ok && d.Err == nil && len(d.Partitions) > 0 {
				ready := true
				for _, p := range d.Partitions {
					ready = ready && p.Err == nil && p.Leader >= 0
				}
				if ready {
					return len(d.Partitions), nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("kafka: topic %s: no leader for every partition after 30s: %w", topic, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
