package cep

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/cepheus-cep/cepheus/event"
	"github.com/cepheus-cep/cepheus/runtime/kafka"
)

// rulesTopic follows the rules topic of a Kafka group
// (KafkaInput.RulesTopic): a compacted topic of one partition whose
// newest record under key "active" is the version every instance of the
// group runs, and under "shadow" its shadow. A deploy to any instance
// goes into the topic; every instance, that one too, reads it and
// switches at its next checkpoint (docs/operations.md, "Hot-loading").
type rulesTopic struct {
	k      *KafkaInput
	mu     sync.Mutex
	next   map[int32]int64       // where the next poll reads from
	latest map[string]rulesEntry // the newest record of each key
	prod   *kafka.Producer
	logf   func(string, ...any)
}

// rulesEntry is a record of the rules topic: a version to deploy.
type rulesEntry struct {
	Offset      int64     `json:"-"`
	Name        string    `json:"name"`
	Source      string    `json:"source"`
	DropChanged bool      `json:"drop_changed,omitempty"`
	Origin      string    `json:"origin"`
	At          time.Time `json:"at"`
	// Watermark is the switch point of the group: every instance whose
	// watermark has not passed it holds its watermark there and switches
	// at exactly it (event.MinTime: at once).
	Watermark event.Time `json:"watermark,omitempty"`
	// gone: a tombstone of the shadow key, written after a promote (the
	// shadow became the active version): the group runs no shadow.
	gone bool
}

// The keys of the rules topic's records.
const (
	rulesActive = "active"
	rulesShadow = "shadow"
)

// rulesPoll is how often an instance looks at the rules topic.
const rulesPoll = 500 * time.Millisecond

// rulesLead is how far past the publishing instance's watermark the
// group's switch point is set (event time): an instance that reads the
// record before its watermark passes the point holds its watermark there
// and switches at exactly it; one already past it (a backlog read faster
// than real time) switches where it is. rulesHoldMax is how long an
// instance holds its watermark for a point its input does not reach (an
// idle one) before it switches where it is.
var rulesLead = 2 * time.Second

const rulesHoldMax = 10 * time.Second

// rulesSwitchPoint is the group's switch point of a record published at
// watermark w: rulesLead past it, at most MaxTime (a watermark within the
// lead of MaxTime, -time-unit ms, wrapped to a point before it); MinTime,
// switch at once, while the publisher has no watermark or has finished.
func rulesSwitchPoint(w event.Time) event.Time {
	if w == event.MinTime || w == event.MaxTime {
		return event.MinTime
	}
	return w.Plus(rulesLead.Milliseconds())
}

// openRulesTopic creates the rules topic if need be, reads it to its end
// and follows it until ctx ends.
func openRulesTopic(ctx context.Context, k *KafkaInput, logf func(string, ...any)) (*rulesTopic, error) {
	if _, err := kafka.EnsureTopics(ctx, k.conn(), []kafka.TopicSpec{{Name: k.RulesTopic, Partitions: 1, Compact: true}}); err != nil {
		return nil, fmt.Errorf("cep: rules topic: %w", err)
	}
	prod, err := kafka.NewProducer(k.conn())
	if err != nil {
		return nil, fmt.Errorf("cep: rules topic: %w", err)
	}
	r := &rulesTopic{k: k, latest: map[string]rulesEntry{}, prod: prod, logf: logf}
	if err := r.poll(ctx); err != nil {
		prod.Close()
		return nil, err
	}
	go func() {
		defer prod.Close()
		tick := time.NewTicker(rulesPoll)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if err := r.poll(ctx); err != nil && ctx.Err() == nil {
				logf("warning: %v (trying again)", err)
			}
		}
	}()
	return r, nil
}

// poll reads what the topic has after the previous poll.
func (r *rulesTopic) poll(ctx context.Context) error {
	r.mu.Lock()
	from := maps.Clone(r.next)
	r.mu.Unlock()
	got := map[string]rulesEntry{}
	next, err := kafka.ReadRecords(ctx, r.k.conn(), r.k.RulesTopic, nil, from, func(_ int32, rec kafka.SourceRecord) error {
		key := string(rec.Key)
		if key != rulesActive && key != rulesShadow {
			return nil
		}
		if rec.Value == nil {
			if key == rulesShadow {
				got[key] = rulesEntry{Offset: rec.Offset, Watermark: event.MinTime, gone: true}
			}
			return nil
		}
		e, err := decodeRulesEntry(rec.Value)
		if err != nil {
			r.logf("warning: rules topic %s: the record at offset %d is no ruleset version: %v (skipped)", r.k.RulesTopic, rec.Offset, err)
			return nil
		}
		// A version that does not compile is skipped here, where it is
		// read: it does not hide the key's newest version that does (an
		// instance started later deploys that one), nor hold the
		// watermark at a switch point it names.
		if _, err := (&Deploy{Name: e.Name, Source: []byte(e.Source)}).validate(); err != nil {
			r.logf("warning: rules topic %s: the %s version at offset %d does not compile, not deployed: %v", r.k.RulesTopic, key, rec.Offset, err)
			return nil
		}
		e.Offset = rec.Offset
		got[key] = e
		return nil
	})
	if err != nil {
		return fmt.Errorf("cep: rules topic %s: %w", r.k.RulesTopic, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.next == nil {
		r.next = map[int32]int64{}
	}
	maps.Copy(r.next, next)
	maps.Copy(r.latest, got)
	return nil
}

// decodeRulesEntry decodes a record of the rules topic. A record without
// a switch point (written by hand) switches at once, as one published
// before the first watermark: its zero would be a point in 1970, which an
// instance without a watermark yet held its watermark at.
func decodeRulesEntry(b []byte) (rulesEntry, error) {
	e := rulesEntry{Watermark: event.MinTime}
	err := json.Unmarshal(b, &e)
	return e, err
}

// pending returns the oldest of the newest records of each key at or
// after offset from: the next version to deploy.
func (r *rulesTopic) pending(from int64) (key string, e rulesEntry, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, v := range r.latest {
		if v.Offset >= from && (!ok || v.Offset < e.Offset) {
			key, e, ok = k, v, true
		}
	}
	return key, e, ok
}

// publish writes d into the topic, for every instance to deploy at
// watermark at. endShadow (d makes the shadow version the active one: a
// promote) also ends the shadow key with a tombstone: its record would
// otherwise stay the key's newest, and an instance that reads the topic
// from its start (a new group) would run that version as the shadow
// beside whatever is active by then.
func (r *rulesTopic) publish(ctx context.Context, d Deploy, at event.Time, endShadow bool) error {
	key := rulesActive
	if d.Shadow {
		key = rulesShadow
	}
	b, err := json.Marshal(rulesEntry{Name: d.Name, Source: string(d.Source), DropChanged: d.DropChanged, Origin: d.Origin, At: time.Now().UTC(), Watermark: at})
	if err != nil {
		return err
	}
	r.prod.Produce(ctx, r.k.RulesTopic, []byte(key), b)
	if endShadow {
		r.prod.Produce(ctx, r.k.RulesTopic, []byte(rulesShadow), nil)
	}
	if err := r.prod.Flush(ctx); err != nil {
		return fmt.Errorf("cep: rules topic %s: %w", r.k.RulesTopic, err)
	}
	return nil
}
