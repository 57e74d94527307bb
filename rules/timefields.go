package rules

import "sort"

// TimeFields returns the fields of the schema, other than the event-time
// field, that hold times (declared with type time): decoders turn them into
// ints of epoch milliseconds. Sorted by slot.
func (rs *Ruleset) TimeFields() []string {
	var slots []int
	for s := range rs.timeSlots {
		if s != rs.TimeSlot {
			slots = append(slots, s)
		}
	}
	sort.Ints(slots)
	out := make([]string, 0, len(slots))
	for _, s := range slots {
		if s < rs.Schema.Len() {
			out = append(out, rs.Schema.Field(s).Name)
		}
	}
	return out
}
