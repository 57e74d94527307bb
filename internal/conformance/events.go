package conformance

import (
	"fmt"
	"strconv"

	"github.com/cepheus-cep/cepheus/event"
)

// Schema is the schema of the conformance events (Flink's Event and
// SubEvent test classes): volume is null on a plain Event, ts null on a
// record that had no timestamp.
var Schema = event.MustSchema(
	event.Field{Name: "id", Kind: event.KindInt},
	event.Field{Name: "name", Kind: event.KindString},
	event.Field{Name: "price", Kind: event.KindFloat},
	event.Field{Name: "ts", Kind: event.KindInt},
	event.Field{Name: "type", Kind: event.KindString},
	event.Field{Name: "volume", Kind: event.KindFloat},
)

// The slots of Schema.
const (
	slotID = iota
	slotName
	slotPrice
	slotTs
	slotType
	slotVolume
)

// time returns the event's timestamp; a record without one gets
// [event.MinTime] (Flink's Long.MIN_VALUE).
func (e *EventSpec) time() event.Time {
	if e.Ts == nil {
		return event.MinTime
	}
	return event.Time(*e.Ts)
}

// toEvent converts e to an event of Schema, with Seq = e.Seq.
func (e *EventSpec) toEvent() *event.Event {
	f := make([]event.Value, Schema.Len())
	f[slotID] = event.Int(e.ID)
	f[slotName] = event.String(e.Name)
	f[slotPrice] = event.Float(e.Price)
	if e.Ts != nil {
		f[slotTs] = event.Int(*e.Ts)
	}
	f[slotType] = event.String(e.Type)
	if e.Volume != nil {
		f[slotVolume] = event.Float(*e.Volume)
	}
	return &event.Event{Time: e.time(), Seq: e.Seq, Fields: f}
}

// valueKey is the identity of e under Java's Event.equals (id, name and
// price), plus the volume for a SubEvent: events with equal keys cannot be
// told apart by the Java tests.
func (e *EventSpec) valueKey() string {
	k := fmt.Sprintf("%d/%s/%s", e.ID, strconv.Quote(e.Name), strconv.FormatFloat(e.Price, 'g', -1, 64))
	if e.Type == "SubEvent" {
		vol := "null"
		if e.Volume != nil {
			vol = strconv.FormatFloat(*e.Volume, 'g', -1, 64)
		}
		k += "/SubEvent/" + vol
	}
	return k
}

// eventIndex maps seq to event for a case's events.
type eventIndex map[uint64]*EventSpec

func indexEvents(evs []EventSpec) (eventIndex, error) {
	idx := make(eventIndex, len(evs))
	for i := range evs {
		e := &evs[i]
		if _, dup := idx[e.Seq]; dup {
			return nil, fmt.Errorf("duplicate event seq %d", e.Seq)
		}
		idx[e.Seq] = e
	}
	return idx, nil
}
