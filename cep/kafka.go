package cep

import (
	"context"
	"io"

	"github.com/cepheus-cep/cepheus/runtime/kafka"
)

// KafkaProduceConfig configures [KafkaProduce]: the brokers, the topic (and
// its partition count when it is created), the key field and the time
// field. It is [kafka.ProduceConfig], whose fields document their defaults.
type KafkaProduceConfig = kafka.ProduceConfig

// KafkaProduceResult says what [KafkaProduce] wrote; see
// [kafka.ProduceResult].
type KafkaProduceResult = kafka.ProduceResult

// KafkaConsumeConfig configures [KafkaConsume]: the brokers, the topic, the
// idle time after which it returns and the isolation level. It is
// [kafka.ConsumeConfig].
type KafkaConsumeConfig = kafka.ConsumeConfig

// KafkaConsumeResult says what [KafkaConsume] read; see
// [kafka.ConsumeResult].
type KafkaConsumeResult = kafka.ConsumeResult

// ErrKafkaNoTopic is returned (wrapped) by [KafkaConsume] for a topic that
// does not exist, and ErrKafkaPartitionCount by [KafkaProduce] for a topic
// that exists with another partition count than asked for. Use errors.Is.
var (
	ErrKafkaNoTopic        = kafka.ErrNoTopic
	ErrKafkaPartitionCount = kafka.ErrPartitionCount
)

// KafkaProduce writes the JSON lines of r to a Kafka topic, one record per
// line, creating the topic when it is missing (with unlimited retention);
// see [kafka.Produce].
func KafkaProduce(ctx context.Context, c KafkaProduceConfig, r io.Reader) (KafkaProduceResult, error) {
	return kafka.Produce(ctx, c, r)
}

// KafkaConsume writes the values of a Kafka topic to w as lines, from the
// beginning, read committed unless told otherwise, and returns once the
// topic has been read to its end and stayed idle; see [kafka.Consume].
func KafkaConsume(ctx context.Context, c KafkaConsumeConfig, w io.Writer) (KafkaConsumeResult, error) {
	return kafka.Consume(ctx, c, w)
}
