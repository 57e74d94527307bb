package conformance

import (
	"encoding/json"
	"fmt"
)

// Case is one conformance case: what to run and what the Java test asserts,
// decoded separately from the same JSON object so that producing results
// can be given the Input alone.
type Case struct {
	Input  Input
	Expect Expectation
	// File is the case file the case was read from, for messages.
	File string
}

// ID returns the case id (Class.method of the Java test).
func (c *Case) ID() string { return c.Input.ID }

// The drivers: how the Java test runs a case.
const (
	DriverNFA      = "nfa_harness"      // one NFA, no operator, no keys
	DriverOperator = "operator_harness" // the keyed CEP operator
)

// Input is everything a case needs to run and nothing it asserts: it has no
// expected_*, compare_mode, comparison or notes field. Unknown keys are
// ignored.
type Input struct {
	ID      string      `json:"id"`
	Driver  string      `json:"driver"`
	Pattern PatternSpec `json:"pattern"`
	// Rules, when set, are several patterns evaluated over the same keyed
	// stream (an extension for generated cases; Pattern is then unused).
	// Each rule has its own result (Result.Rules); Flink runs one
	// CepOperator per rule over the same input.
	Rules  []PatternSpec `json:"rules,omitempty"`
	Events []EventSpec   `json:"events"`
	// TimeoutHandling compiles the NFA with timed-out partial matches
	// reported (nfa.WithTimeouts).
	TimeoutHandling bool `json:"timeout_handling"`
	// SkipThrowOnMiss also appears at the top level of a case; either place
	// turns it on.
	SkipThrowOnMiss bool `json:"skip_throw_on_miss"`

	// The operator_harness fields.
	TimeCharacteristic string          `json:"time_characteristic"` // event_time (default) or processing_time
	KeyBy              string          `json:"key_by"`              // the field the operator is keyed by
	EventComparator    json.RawMessage `json:"event_comparator"`    // prose or {"field", "order"}; see comparator.go
	OperatorSteps      []Step          `json:"operator_steps"`

	// WakeEveryKey is a counterfactual for the Flink runner (difftest's
	// window-timer explanation): before each watermark step, each
	// processing-time step that moves the clock past every earlier clock
	// (the harness's clock starts at 0: a first step to 0 moves none) and,
	// without a comparator, each step to the latest clock again, Flink
	// sets a timer at that time for every key it has seen, so that
	// every key is woken whenever time advances. Cepheus ignores it: it
	// wakes a key at every deadline anyway.
	WakeEveryKey bool `json:"wake_every_key,omitempty"`
}

// Rule returns the input of rule k of a case with several rules: the
// same events and steps, with Pattern set to Rules[k] and an id of
// "<id>/<k>".
func (in *Input) Rule(k int) Input {
	r := *in
	r.ID = fmt.Sprintf("%s/%d", in.ID, k)
	r.Pattern = in.Rules[k]
	r.Rules = nil
	return r
}

// PatternSpec is the pattern of a case.
type PatternSpec struct {
	Stages []StageSpec `json:"stages"`
	// WithinMs is the within window in milliseconds; nil means none.
	WithinMs *int64 `json:"within_ms"`
	// WithinType is FIRST_AND_LAST (the default when empty) or
	// PREVIOUS_AND_CURRENT.
	WithinType string `json:"within_type"`
	// Skip is noSkip, skipToNext, skipPastLastEvent, skipToFirst:<stage> or
	// skipToLast:<stage>; empty means noSkip.
	Skip            string `json:"skip"`
	SkipThrowOnMiss bool   `json:"skip_throw_on_miss"`
}

// StageSpec is one stage of a pattern, or a group of stages.
type StageSpec struct {
	Name string `json:"name"`
	// Contiguity is begin, next, followedBy, followedByAny, notNext or
	// notFollowedBy.
	Contiguity string `json:"contiguity"`
	// Condition is an expr-lang condition (see package rules); nil means the
	// stage has no where.
	Condition *string `json:"condition"`
	// Chain are more conditions applied after Condition, in order, as
	// Flink's .where(c).or(c2).where(c3): each where is ANDed with everything
	// before it, each or ORed with everything before it (an extension for
	// generated cases).
	Chain      []ChainedCondition `json:"chain,omitempty"`
	Quantifier QuantifierSpec     `json:"quantifier"`
	Until      *string            `json:"until"`
	// WithinMs is a window set on this stage itself, Flink's within(d,
	// WithinType) called on it, with other stages possibly after it (an
	// extension for generated cases); nil means none. WithinType is as in
	// PatternSpec. Flink keeps the smallest FIRST_AND_LAST window of the
	// top-level stages; a PREVIOUS_AND_CURRENT window bounds the time from
	// the previously matched event to the event this stage takes.
	WithinMs   *int64 `json:"within_ms,omitempty"`
	WithinType string `json:"within_type,omitempty"`
	// Group, when set, makes the stage a group of its inner stages.
	Group *GroupSpec `json:"group"`
}

// ChainedCondition is one condition of StageSpec.Chain.
type ChainedCondition struct {
	// Op is "where" (AND) or "or" (OR).
	Op   string `json:"op"`
	Expr string `json:"expr"`
}

// GroupSpec is the inner pattern of a group stage.
type GroupSpec struct {
	Stages []StageSpec `json:"stages"`
}

// QuantifierSpec is the quantifier of a stage.
type QuantifierSpec struct {
	// Kind is one, times, timesOrMore or oneOrMore.
	Kind string `json:"kind"`
	Min  int    `json:"min"`
	// Max is the upper bound of times; nil means unbounded.
	Max      *int `json:"max"`
	Optional bool `json:"optional"`
	Greedy   bool `json:"greedy"`
	// Inner is the contiguity between loop iterations: relaxed (default),
	// consecutive or allowCombinations.
	Inner string `json:"inner"`
	// WindowMs is the per-loop gap window (an extension for generated
	// cases: Flink's oneOrMore(Duration) and friends); nil means none.
	WindowMs *int64 `json:"window_ms"`
}

// EventSpec is one input event. Seq is its 1-based feed position and its
// only unique key.
type EventSpec struct {
	Seq   uint64  `json:"seq"`
	ID    int64   `json:"id"`
	Name  string  `json:"name"`
	Price float64 `json:"price"`
	// Ts is the timestamp; nil means the Java record had none.
	Ts   *int64 `json:"ts"`
	Type string `json:"type"` // Event or SubEvent
	// Volume is set for SubEvent only.
	Volume *float64 `json:"volume"`
}

// Step is one call of an operator_harness script; exactly one field is set.
type Step struct {
	Event           *uint64 `json:"event"`           // processElement(events[seq])
	Watermark       *int64  `json:"watermark"`       // processWatermark(t)
	ProcessingTime  *int64  `json:"processing_time"` // setProcessingTime(t)
	SnapshotRestore *bool   `json:"snapshot_restore"`
}

// Expectation is what the Java test asserts about a case. Only the judge
// reads it.
type Expectation struct {
	// CompareMode says how results are compared (see judge.go).
	CompareMode string `json:"compare_mode"`
	// MatchesSeq are the matches as seq lists, flattened stage by stage; nil
	// when the test asserts no match content.
	MatchesSeq [][]uint64 `json:"expected_matches_seq"`
	// MatchCount is set when only the number of matches is asserted.
	MatchCount *int `json:"expected_match_count"`
	// TimeoutsSeq and TimeoutTimestamps are the timed-out partial matches
	// and the timestamp of each; nil when not asserted.
	TimeoutsSeq       [][]uint64 `json:"expected_timeouts_seq"`
	TimeoutTimestamps []int64    `json:"expected_timeout_timestamps"`
	// OutputSequence is the exact main output of an operator case.
	OutputSequence []ExpectedItem `json:"expected_output_sequence"`
	// LateEventsSeq lists the late events in arrival order.
	LateEventsSeq []uint64 `json:"expected_late_events_seq"`
	// StageMapSeq gives per-stage event lists of each match.
	StageMapSeq []map[string][]uint64 `json:"expected_stage_map_seq"`
	// Error names the exception the test expects; nil when none.
	Error *string `json:"expected_error"`
}

// ExpectedItem is one item of an expected operator output: a watermark or a
// match.
type ExpectedItem struct {
	Watermark *int64   `json:"watermark"`
	MatchSeq  []uint64 `json:"match_seq"`
}
