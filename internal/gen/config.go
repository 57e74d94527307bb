package gen

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Config says what to generate. Build one with [DefaultConfig] and change
// fields; the zero Config is not valid. [New] calls [Config.Validate].
type Config struct {
	// Seed selects the data: the same Config gives the same bytes. Default 1.
	Seed uint64

	// Start is the time of the first possible event (UTC; sub-millisecond
	// parts are dropped). Default 2026-01-01T00:00:00Z.
	Start time.Time

	// HistoryDays is the number of days of sparse history before the dense
	// days, at HistoryEventsPerDay normal events a day. Default 60.
	HistoryDays int
	// HistoryEventsPerDay is the approximate number of normal (not fraud)
	// events per history day. Default 2,000.
	HistoryEventsPerDay int

	// Days is the number of dense days after the history, at EventsPerDay
	// normal events a day. Default 1.
	Days int
	// EventsPerDay is the approximate number of normal events per dense
	// day. Default 200,000.
	EventsPerDay int

	// Customers is the number of customers (at least 1). Default 50,000.
	Customers int
	// Merchants is the number of merchants, at least [MinMerchants] (one
	// shop per city and one online shop per country). Default 5,000.
	Merchants int

	// Scenarios maps a fraud scenario (see [ScenarioNames]) to its rate:
	// instances per 100,000 normal events, so the sparse history gets
	// proportionally fewer than the dense days. A missing name or 0
	// disables the scenario. dormant_card needs HistoryDays+Days >= 61 (a
	// card must have been idle for 60 days). Default: every scenario at 10.
	Scenarios map[string]float64

	// MaxDelay bounds the disorder of the output: every event's ts is at
	// most MaxDelay behind the largest ts written before it. About a
	// quarter of the events are held back by up to MaxDelay; 0 writes
	// events in ts order. Millisecond resolution, at most 1h. Default 5s.
	MaxDelay time.Duration

	// Skew is the Zipf exponent s of customer and merchant popularity
	// (P(rank k) ∝ (k+v)^-s, with v = 10 for customers and 1 for a city's
	// or country's merchants). Must be in (1, 10]. Default 1.1.
	Skew float64
}

// The fraud scenarios, in the order the generator handles them.
const (
	scenNone = iota
	scenCardTesting
	scenAccountTakeover
	scenImpossibleTravel
	scenLargeThenForeign
	scenRefundAbuse
	scenVelocityBurst
	scenDormantCard
	scenAuthNotCaptured
	numScenarios
)

var scenarioNames = [numScenarios]string{
	scenNone:             "",
	scenCardTesting:      "card_testing",
	scenAccountTakeover:  "account_takeover",
	scenImpossibleTravel: "impossible_travel",
	scenLargeThenForeign: "large_then_foreign",
	scenRefundAbuse:      "refund_abuse",
	scenVelocityBurst:    "velocity_burst",
	scenDormantCard:      "dormant_card",
	scenAuthNotCaptured:  "auth_not_captured",
}

// ScenarioNames returns the names of the fraud scenarios, the values of the
// scenario field, in a fixed order. The caller owns the slice.
func ScenarioNames() []string {
	return slices.Clone(scenarioNames[1:])
}

// MinMerchants is the smallest valid [Config.Merchants]: one shop in each
// of the 25 cities and one online shop in each of the 20 countries.
const MinMerchants = len(cities) + len(countries)

// dormantIdle is how long, at least, a dormant card has been idle when the
// dormant_card scenario uses it, in milliseconds. minDormantDays is the
// shortest timeline that leaves room for it.
const (
	dormantIdle    = 60 * day
	minDormantDays = 61
)

// Durations in milliseconds.
const (
	second = 1000
	minute = 60 * second
	hour   = 60 * minute
	day    = 24 * hour
)

// DefaultConfig returns the defaults: 60 days of sparse history, then one
// dense day; 50,000 customers, 5,000 merchants; every scenario at 10
// instances per 100,000 normal events; 5 s of disorder.
func DefaultConfig() Config {
	sc := make(map[string]float64, numScenarios-1)
	for _, n := range scenarioNames[1:] {
		sc[n] = 10
	}
	return Config{
		Seed:                1,
		Start:               time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
		HistoryDays:         60,
		HistoryEventsPerDay: 2000,
		Days:                1,
		EventsPerDay:        200_000,
		Customers:           50_000,
		Merchants:           5000,
		Scenarios:           sc,
		MaxDelay:            5 * time.Second,
		Skew:                1.1,
	}
}

// Limits that keep a run's memory and the output's timestamps sane.
const (
	maxDays         = 3660
	maxEventsPerDay = 1 << 30
	maxCustomers    = 10_000_000
	maxMerchants    = 1_000_000
)

// MaxRate is the largest scenario rate of [Config.Scenarios]: instances
// per 100,000 normal events.
const MaxRate = 100_000

// ConfigError is one problem of a [Config], as [Config.Validate] reports
// it. Error names the Config fields ("gen: Days -1 is outside 0..3660");
// [ConfigError.Message] lets a caller name them its own way, as a command
// line names its flags.
type ConfigError struct {
	// Fields are the fields at fault, in the order the message names them.
	Fields []string
	msg    func(name func(field string) string) string
}

func (e *ConfigError) Error() string { return "gen: " + e.Message(nil) }

// Message returns the problem without the "gen: " prefix, each field
// written as name(field); a nil name writes the field names.
func (e *ConfigError) Message(name func(field string) string) string {
	if name == nil {
		name = func(f string) string { return f }
	}
	return e.msg(name)
}

// Validate reports every problem of c, each a [*ConfigError], joined with
// [errors.Join]; nil when there is none.
func (c Config) Validate() error {
	var errs []error
	bad := func(fields []string, msg func(name func(string) string) string) {
		errs = append(errs, &ConfigError{Fields: fields, msg: msg})
	}
	// outside reports a field whose value is outside lo..hi.
	outside := func(field string, v, lo, hi any, why string) {
		bad([]string{field}, func(name func(string) string) string {
			return fmt.Sprintf("%s %v is outside %v..%v%s", name(field), v, lo, hi, why)
		})
	}
	if c.Start.IsZero() {
		bad([]string{"Start"}, func(name func(string) string) string { return name("Start") + " is not set" })
	} else if y := c.Start.UTC().Year(); y < 1970 || y > 9000 {
		bad([]string{"Start"}, func(name func(string) string) string {
			return fmt.Sprintf("%s %s is outside the years 1970..9000", name("Start"), c.Start.UTC().Format(time.RFC3339))
		})
	}
	if c.HistoryDays < 0 || c.HistoryDays > maxDays {
		outside("HistoryDays", c.HistoryDays, 0, maxDays, "")
	}
	if c.Days < 0 || c.Days > maxDays {
		outside("Days", c.Days, 0, maxDays, "")
	}
	days := c.HistoryDays + c.Days
	daysOK := c.HistoryDays >= 0 && c.Days >= 0 // else already reported
	if daysOK && days < 1 {
		bad([]string{"HistoryDays", "Days"}, func(name func(string) string) string {
			return fmt.Sprintf("%s and %s add up to 0 days, want at least 1", name("HistoryDays"), name("Days"))
		})
	}
	if c.HistoryEventsPerDay < 0 || c.HistoryEventsPerDay > maxEventsPerDay {
		outside("HistoryEventsPerDay", c.HistoryEventsPerDay, 0, maxEventsPerDay, "")
	}
	if c.EventsPerDay < 0 || c.EventsPerDay > maxEventsPerDay {
		outside("EventsPerDay", c.EventsPerDay, 0, maxEventsPerDay, "")
	}
	if c.Customers < 1 || c.Customers > maxCustomers {
		outside("Customers", c.Customers, 1, maxCustomers, "")
	}
	if c.Merchants < MinMerchants || c.Merchants > maxMerchants {
		outside("Merchants", c.Merchants, MinMerchants, maxMerchants, " (one shop per city and one online shop per country)")
	}
	names := make([]string, 0, len(c.Scenarios))
	for name := range c.Scenarios {
		names = append(names, name)
	}
	slices.Sort(names) // one message order for one config
	for _, sc := range names {
		rate := c.Scenarios[sc]
		if scenarioIndex(sc) < 0 {
			bad([]string{"Scenarios"}, func(func(string) string) string {
				return fmt.Sprintf("unknown scenario %q (known: %s)", sc, strings.Join(scenarioNames[1:], ", "))
			})
			continue
		}
		if math.IsNaN(rate) || rate < 0 || rate > MaxRate {
			bad([]string{"Scenarios"}, func(func(string) string) string {
				return fmt.Sprintf("scenario %s: rate %v is outside 0..%d instances per 100,000 normal events", sc, rate, MaxRate)
			})
		}
	}
	if daysOK && days < minDormantDays && c.Scenarios[scenarioNames[scenDormantCard]] > 0 {
		var others []string // the scenarios asked for but dormant_card, in their order
		for _, sc := range scenarioNames[1:] {
			if sc != scenarioNames[scenDormantCard] && c.Scenarios[sc] > 0 {
				others = append(others, sc)
			}
		}
		bad([]string{"HistoryDays", "Days", "Scenarios"}, func(name func(string) string) string {
			leave := "leave it out of " + name("Scenarios")
			if len(others) > 0 {
				leave += " (" + name("Scenarios") + " " + strings.Join(others, ",") + ")"
			}
			return fmt.Sprintf("scenario dormant_card needs at least %d days (%s and %s add up to %d); %s or add days",
				minDormantDays, name("HistoryDays"), name("Days"), days, leave)
		})
	}
	if c.MaxDelay < 0 || c.MaxDelay > time.Hour {
		outside("MaxDelay", formatDuration(c.MaxDelay), 0, "1h", "")
	}
	if !(c.Skew > 1 && c.Skew <= 10) { // also refuses NaN
		bad([]string{"Skew"}, func(name func(string) string) string {
			return fmt.Sprintf("%s %v is outside (1, 10]", name("Skew"), c.Skew)
		})
	}
	return errors.Join(errs...)
}

// formatDuration writes d as it would be written: 2h, 1m30s, 500ms, -5s
// (time.Duration's String without its zero units: 2h0m0s is 2h).
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// scenarioIndex returns the index of a scenario name, or -1.
func scenarioIndex(name string) int {
	if name == "" {
		return -1
	}
	return slices.Index(scenarioNames[:], name)
}
