package cep

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
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
	// refused holds why a record of the active key was passed over where
	// it was read (its From was not the version before it), by offset:
	// the call that published it is told.
	refused map[int64]error
	prod    *kafka.Producer
	logf    func(string, ...any)
	// polling serializes the polls (the follower's and a publisher's);
	// active is the version of the newest active record the polls took,
	// in the topic's order.
	polling sync.Mutex
	active  string
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
	// From is, in a record of the active key that a rollback, a promote
	// or a deploy with a From wrote, the version the publishing instance
	// ran: the record counts only if the record of the key before it in
	// the topic is of that version. Two instances that publish at once
	// each check their own active version, and the one that wrote
	// second had not seen the first's record: its rollback went past
	// that version (the first's deploy was lost), its promote made active
	// what the first had replaced.
	From string `json:"from,omitempty"`
	// hash is the version's content hash (found where it was read).
	hash string
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
	r := &rulesTopic{k: k, latest: map[string]rulesEntry{}, refused: map[int64]error{}, prod: prod, logf: logf}
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
	r.polling.Lock()
	defer r.polling.Unlock()
	r.mu.Lock()
	from := maps.Clone(r.next)
	r.mu.Unlock()
	got := map[string]rulesEntry{}
	refused := map[int64]error{}
	endOf := int64(-1) // the offset of a refused promote's tombstone
	next, err := kafka.ReadRecords(ctx, r.k.conn(), r.k.RulesTopic, nil, from, func(_ int32, rec kafka.SourceRecord) error {
		key := string(rec.Key)
		if key != rulesActive && key != rulesShadow {
			return nil
		}
		if rec.Value == nil {
			if key == rulesShadow && rec.Offset == endOf {
				return nil // the refused promote's end of the shadow
			}
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
		rs, err := (&Deploy{Name: e.Name, Source: []byte(e.Source)}).validate()
		if err != nil {
			r.logf("warning: rules topic %s: the %s version at offset %d does not compile, not deployed: %v", r.k.RulesTopic, key, rec.Offset, err)
			return nil
		}
		if key == rulesActive && e.From != "" && r.active != "" && !strings.HasPrefix(r.active, e.From) {
			// Written against a version the record before it had
			// replaced: every instance reads the topic in this order,
			// so every one passes it over.
			err := fmt.Errorf("%w: version %.12s is active (written into rules topic %s before this %s), not %.12s: nothing switched (every instance passes this %s's record over)", ErrNotActive, r.active, r.k.RulesTopic, e.Origin, e.From, e.Origin)
			r.logf("warning: rules topic %s: the active version at offset %d is not deployed: %v", r.k.RulesTopic, rec.Offset, err)
			refused[rec.Offset] = err
			if e.Origin == "promote" {
				endOf = rec.Offset + 1 // publish wrote its tombstone next
			}
			return nil
		}
		if key == rulesActive {
			r.active = rs.Hash
		}
		e.Offset, e.hash = rec.Offset, rs.Hash
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
	maps.Copy(r.refused, refused)
	return nil
}

// passedOver tells why the record of key at offset off, which a call
// published, will not be deployed: it was refused where it was read (its
// From), or a newer record of its key came after it and the job, whose
// plan has taken the topic up to next, has moved past it. nil while it
// may still be deployed. Without it such a call waited for a switch that
// never came, until its deadline, and was told that whether the job
// switched was not known.
func (r *rulesTopic) passedOver(off int64, key string, next int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.refused[off]; err != nil {
		return err
	}
	if l, ok := r.latest[key]; ok && l.Offset > off && next > off {
		return fmt.Errorf("%w: rules topic %s has version %.12s (%s), written after this one at offset %d (another call at the same time): nothing switched to it", ErrSuperseded, r.k.RulesTopic, l.hash, l.Origin, l.Offset)
	}
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
// from is the version the record counts against (rulesEntry.From); it
// returns the record's offset.
func (r *rulesTopic) publish(ctx context.Context, d Deploy, at event.Time, endShadow bool, from string) (int64, error) {
	key := rulesActive
	if d.Shadow {
		key, from = rulesShadow, ""
	}
	b, err := json.Marshal(rulesEntry{Name: d.Name, Source: string(d.Source), DropChanged: d.DropChanged, Origin: d.Origin, At: time.Now().UTC(), Watermark: at, From: from})
	if err != nil {
		return 0, err
	}
	var off int64
	r.prod.ProduceAt(ctx, r.k.RulesTopic, []byte(key), b, &off)
	if endShadow {
		r.prod.Produce(ctx, r.k.RulesTopic, []byte(rulesShadow), nil)
	}
	if err := r.prod.Flush(ctx); err != nil {
		return 0, fmt.Errorf("cep: rules topic %s: %w", r.k.RulesTopic, err)
	}
	return off, nil
}
