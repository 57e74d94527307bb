package gen

import (
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/cepheus-cep/cepheus/event"
)

// The event types, the values of the type field.
const (
	TypeAuth          = "auth"           // card authorization
	TypeCapture       = "capture"        // the merchant captures (settles) an authorization
	TypeRefund        = "refund"         // the merchant refunds money to the card
	TypeLogin         = "login"          // the customer logs in to online banking
	TypePasswordReset = "password_reset" // the customer's password is reset
	TypeNewDevice     = "new_device"     // a device the customer never used is registered
	TypeTransfer      = "transfer"       // account-to-account transfer out of the customer's account
)

// Currency is the currency of every amount: one settlement currency, so
// that amount thresholds compare across countries.
const Currency = "USD"

// Record is one generated event. The JSON line of a Record
// ([Record.AppendJSON]) has the fields of [Fields], in that order. Fields
// that do not apply to a type hold "" (strings) or 0 (amount).
type Record struct {
	Time            event.Time // ts: milliseconds since the Unix epoch, UTC
	Type            string     // type: one of the Type constants
	ID              uint64     // event_id is "evt_" followed by ID in decimal; unique in a run
	CustomerID      string     // customer_id
	CardID          string     // card_id; "" for account events
	Cents           int64      // amount, in cents; 0 for login, password_reset and new_device
	Currency        string     // currency: [Currency] when there is an amount, else ""
	MerchantID      string     // merchant_id; "" for account events
	MerchantCountry string     // merchant_country: ISO 3166-1 alpha-2
	MCC             string     // mcc: the merchant category code, 4 digits
	CardCountry     string     // card_country: the card's issuing country
	DeviceID        string     // device_id; "" for card-present purchases, captures and refunds
	IP              string     // ip: IPv4, dotted; "" where DeviceID is ""
	IPCountry       string     // ip_country: where IP is
	Lat, Lon        float64    // lat, lon: where the event happened, in degrees (written with 4 decimals)
	Fraud           bool       // is_fraud
	Scenario        string     // scenario: the fraud scenario, "" for normal events

	typ, scen uint8 // Type and Scenario as indexes, for the run's counters
}

// Type indexes.
const (
	tAuth = iota
	tCapture
	tRefund
	tLogin
	tPasswordReset
	tNewDevice
	tTransfer
	numTypes
)

var typeNames = [numTypes]string{
	tAuth: TypeAuth, tCapture: TypeCapture, tRefund: TypeRefund, tLogin: TypeLogin,
	tPasswordReset: TypePasswordReset, tNewDevice: TypeNewDevice, tTransfer: TypeTransfer,
}

// Types returns the event types in a fixed order. The caller owns the
// slice.
func Types() []string { return slices.Clone(typeNames[:]) }

// EventID returns the event_id of r.
func (r *Record) EventID() string { return "evt_" + strconv.FormatUint(r.ID, 10) }

// Amount returns the amount in currency units.
func (r *Record) Amount() float64 { return float64(r.Cents) / 100 }

// fields is the JSON field set, in output order. Every line has exactly
// these fields; docs/data.md documents them (a test checks that it does).
var fields = [...]event.Field{
	{Name: "ts", Kind: event.KindString},
	{Name: "type", Kind: event.KindString},
	{Name: "event_id", Kind: event.KindString},
	{Name: "customer_id", Kind: event.KindString},
	{Name: "card_id", Kind: event.KindString},
	{Name: "amount", Kind: event.KindFloat},
	{Name: "currency", Kind: event.KindString},
	{Name: "merchant_id", Kind: event.KindString},
	{Name: "merchant_country", Kind: event.KindString},
	{Name: "mcc", Kind: event.KindString},
	{Name: "card_country", Kind: event.KindString},
	{Name: "device_id", Kind: event.KindString},
	{Name: "ip", Kind: event.KindString},
	{Name: "ip_country", Kind: event.KindString},
	{Name: "lat", Kind: event.KindFloat},
	{Name: "lon", Kind: event.KindFloat},
	{Name: "is_fraud", Kind: event.KindBool},
	{Name: "scenario", Kind: event.KindString},
}

// Fields returns the fields of a JSON line in output order, with their JSON
// kinds: ts is an RFC 3339 string with milliseconds in UTC (the event time
// of a ruleset: "event time ts"). The caller owns the slice.
func Fields() []event.Field { return slices.Clone(fields[:]) }

// AppendJSON appends r as one JSON object and a newline to b and returns the
// extended buffer. It does not allocate when b has room.
func (r *Record) AppendJSON(b []byte) []byte {
	b = append(b, `{"ts":"`...)
	b = appendTime(b, r.Time)
	b = append(b, `","type":`...)
	b = appendString(b, r.Type)
	b = append(b, `,"event_id":"evt_`...)
	b = strconv.AppendUint(b, r.ID, 10)
	b = append(b, `","customer_id":`...)
	b = appendString(b, r.CustomerID)
	b = append(b, `,"card_id":`...)
	b = appendString(b, r.CardID)
	b = append(b, `,"amount":`...)
	b = appendCents(b, r.Cents)
	b = append(b, `,"currency":`...)
	b = appendString(b, r.Currency)
	b = append(b, `,"merchant_id":`...)
	b = appendString(b, r.MerchantID)
	b = append(b, `,"merchant_country":`...)
	b = appendString(b, r.MerchantCountry)
	b = append(b, `,"mcc":`...)
	b = appendString(b, r.MCC)
	b = append(b, `,"card_country":`...)
	b = appendString(b, r.CardCountry)
	b = append(b, `,"device_id":`...)
	b = appendString(b, r.DeviceID)
	b = append(b, `,"ip":`...)
	b = appendString(b, r.IP)
	b = append(b, `,"ip_country":`...)
	b = appendString(b, r.IPCountry)
	b = append(b, `,"lat":`...)
	b = appendDegrees(b, r.Lat)
	b = append(b, `,"lon":`...)
	b = appendDegrees(b, r.Lon)
	b = append(b, `,"is_fraud":`...)
	b = strconv.AppendBool(b, r.Fraud)
	b = append(b, `,"scenario":`...)
	b = appendString(b, r.Scenario)
	return append(b, "}\n"...)
}

// appendCents writes cents as a decimal with exactly two decimals.
func appendCents(b []byte, cents int64) []byte {
	if cents < 0 {
		b = append(b, '-')
		cents = -cents // cents never is MinInt64: amounts are small
	}
	b = strconv.AppendInt(b, cents/100, 10)
	c := cents % 100
	return append(b, '.', byte('0'+c/10), byte('0'+c%10))
}

// appendDegrees writes a coordinate with exactly 4 decimals (about 11 m),
// by integer arithmetic: strconv's fixed-precision float formatting takes
// its slow path.
func appendDegrees(b []byte, deg float64) []byte {
	if math.IsNaN(deg) || math.IsInf(deg, 0) || math.Abs(deg) > 1e6 {
		return append(b, '0') // not a coordinate; JSON has no NaN
	}
	v := int64(math.Round(deg * 1e4))
	if v < 0 {
		b = append(b, '-')
		v = -v
	}
	b = strconv.AppendInt(b, v/10000, 10)
	f := v % 10000
	return append(b, '.', byte('0'+f/1000), byte('0'+f/100%10), byte('0'+f/10%10), byte('0'+f%10))
}

// appendString writes s as a JSON string. The generator's own strings need
// no escaping; the escapes are for Records built by callers.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	i := 0
	// Skip 8 bytes at a time while none of them needs escaping.
	for ; i+8 <= len(s); i += 8 {
		x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		if needsEscape(x) {
			break
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' {
			return appendEscaped(b, s, i)
		}
	}
	b = append(b, s...)
	return append(b, '"')
}

// needsEscape reports whether one of the 8 bytes in x is below 0x20, a
// quote or a backslash (the bit tricks of "Bit Twiddling Hacks": a byte
// that is zero after the subtraction or xor sets its high bit).
func needsEscape(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	low := (x - ones*0x20) &^ x
	quote := x ^ (ones * '"')
	backslash := x ^ (ones * '\\')
	return (low|(quote-ones)&^quote|(backslash-ones)&^backslash)&highs != 0
}

// appendEscaped writes the rest of the JSON string s, whose first i bytes
// need no escaping, and the closing quote.
func appendEscaped(b []byte, s string, i int) []byte {
	b = append(b, s[:i]...)
	start := i
	for ; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\t':
			b = append(b, '\\', 't')
		case '\r':
			b = append(b, '\\', 'r')
		default:
			const hex = "0123456789abcdef"
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendTime writes t as RFC 3339 with milliseconds in UTC, like
// event.Time.String, by integer arithmetic: several times faster than
// time.Time.AppendFormat, which is left for years outside 0000..9999.
func appendTime(b []byte, t event.Time) []byte {
	const lo, hi = -62167219200000, 253402300799999 // 0000-01-01, 9999-12-31T23:59:59.999
	ms := int64(t)
	if ms < lo || ms > hi {
		return time.UnixMilli(ms).UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	}
	days := ms / day
	rem := ms % day
	if rem < 0 {
		rem += day
		days--
	}
	y, m, d := civil(days)
	b = append4(b, y)
	b = append(b, '-')
	b = append2(b, m)
	b = append(b, '-')
	b = append2(b, d)
	b = append(b, 'T')
	b = append2(b, int(rem/hour))
	b = append(b, ':')
	b = append2(b, int(rem/minute%60))
	b = append(b, ':')
	b = append2(b, int(rem/second%60))
	b = append(b, '.')
	msec := int(rem % second)
	b = append(b, byte('0'+msec/100), byte('0'+msec/10%10), byte('0'+msec%10))
	return append(b, 'Z')
}

func append2(b []byte, v int) []byte { return append(b, byte('0'+v/10), byte('0'+v%10)) }

func append4(b []byte, v int) []byte {
	return append(b, byte('0'+v/1000), byte('0'+v/100%10), byte('0'+v/10%10), byte('0'+v%10))
}

// civil converts days since 1970-01-01 to a proleptic Gregorian date
// (Howard Hinnant's days_from_civil, inverted).
func civil(days int64) (year, month, dayOfMonth int) {
	z := days + 719468
	era := z / 146097
	if z < 0 && z%146097 != 0 {
		era--
	}
	doe := z - era*146097                                  // [0, 146096]
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365 // [0, 399]
	y := yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100) // [0, 365]
	mp := (5*doy + 2) / 153                  // [0, 11]
	d := doy - (153*mp+2)/5 + 1              // [1, 31]
	m := mp + 3
	if m > 12 {
		m -= 12
	}
	if m <= 2 {
		y++
	}
	return int(y), int(m), int(d)
}
