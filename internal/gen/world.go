package gen

import (
	"math"
	"strconv"
)

// A country of the built-in world.
type country struct {
	code   string // ISO 3166-1 alpha-2
	weight float64
}

// A city of the built-in world, with its standard-time UTC offset (no
// daylight saving time: the daily rhythm only needs the rough local hour).
type city struct {
	name      string
	country   int // index into countries
	lat, lon  float64
	utcOffset int // minutes
}

// countries are the home countries of customers and merchants, weighted by
// how many of each the generator makes.
var countries = [...]country{
	{"US", 25}, {"GB", 12}, {"DE", 10}, {"FR", 9}, {"ES", 5},
	{"IT", 5}, {"NL", 4}, {"PL", 3}, {"CA", 5}, {"MX", 3},
	{"BR", 4}, {"JP", 3}, {"AU", 3}, {"IN", 3}, {"SG", 1},
	{"KR", 1}, {"TR", 1}, {"AE", 1}, {"ZA", 1}, {"NG", 1},
}

// Country indexes used by the city table.
const (
	cUS = iota
	cGB
	cDE
	cFR
	cES
	cIT
	cNL
	cPL
	cCA
	cMX
	cBR
	cJP
	cAU
	cIN
	cSG
	cKR
	cTR
	cAE
	cZA
	cNG
)

var cities = [...]city{
	{"New York", cUS, 40.7128, -74.0060, -300},
	{"Los Angeles", cUS, 34.0522, -118.2437, -480},
	{"Chicago", cUS, 41.8781, -87.6298, -360},
	{"London", cGB, 51.5074, -0.1278, 0},
	{"Manchester", cGB, 53.4808, -2.2426, 0},
	{"Berlin", cDE, 52.5200, 13.4050, 60},
	{"Munich", cDE, 48.1351, 11.5820, 60},
	{"Paris", cFR, 48.8566, 2.3522, 60},
	{"Lyon", cFR, 45.7640, 4.8357, 60},
	{"Madrid", cES, 40.4168, -3.7038, 60},
	{"Rome", cIT, 41.9028, 12.4964, 60},
	{"Amsterdam", cNL, 52.3676, 4.9041, 60},
	{"Warsaw", cPL, 52.2297, 21.0122, 60},
	{"Toronto", cCA, 43.6532, -79.3832, -300},
	{"Mexico City", cMX, 19.4326, -99.1332, -360},
	{"São Paulo", cBR, -23.5505, -46.6333, -180},
	{"Tokyo", cJP, 35.6762, 139.6503, 540},
	{"Sydney", cAU, -33.8688, 151.2093, 600},
	{"Mumbai", cIN, 19.0760, 72.8777, 330},
	{"Singapore", cSG, 1.3521, 103.8198, 480},
	{"Seoul", cKR, 37.5665, 126.9780, 540},
	{"Istanbul", cTR, 41.0082, 28.9784, 180},
	{"Dubai", cAE, 25.2048, 55.2708, 240},
	{"Johannesburg", cZA, -26.2041, 28.0473, 120},
	{"Lagos", cNG, 6.5244, 3.3792, 60},
}

// A merchant category: its MCC, the log-normal amount distribution of its
// purchases (median and sigma of the logarithm), the share of its merchants
// that sell online, and its weight among merchants.
type category struct {
	mcc        string
	name       string
	median     float64
	sigma      float64
	online     float64
	weight     float64
	highTicket bool // a plausible place for a purchase over 2,000
}

var categories = []category{
	{"5411", "grocery", 45, 0.7, 0.05, 25, false},
	{"5812", "restaurant", 35, 0.6, 0.02, 18, false},
	{"5814", "fast food", 12, 0.5, 0.05, 12, false},
	{"5541", "fuel", 55, 0.4, 0, 10, false},
	{"5311", "department store", 80, 0.9, 0.3, 8, true},
	{"5732", "electronics", 180, 1.0, 0.5, 5, true},
	{"5999", "retail and marketplaces", 40, 1.0, 0.8, 10, false},
	{"4121", "taxi and ride hailing", 20, 0.6, 0.9, 6, false},
	{"4511", "airline", 450, 0.6, 0.9, 1.5, true},
	{"7011", "hotel", 220, 0.7, 0.6, 2, true},
	{"5816", "digital goods and games", 10, 0.8, 1, 3, false},
	{"5944", "jewelry", 300, 1.1, 0.2, 0.5, true},
	{"5912", "pharmacy", 25, 0.6, 0.1, 4, false},
}

// farCities[i] lists the cities more than farKM from city i, for
// impossible travel.
var farCities = func() [][]int {
	out := make([][]int, len(cities))
	for i, a := range cities {
		for j, b := range cities {
			if distanceKM(a.lat, a.lon, b.lat, b.lon) > farKM {
				out[i] = append(out[i], j)
			}
		}
	}
	return out
}()

// farKM is the distance that makes two card-present purchases an hour
// apart impossible; the impossible_travel scenario picks cities further
// apart than this (the jitter around a city is far smaller).
const farKM = 2500

// distanceKM is the great-circle distance between two points in degrees.
func distanceKM(lat1, lon1, lat2, lon2 float64) float64 {
	const r = 6371.0
	rad := math.Pi / 180
	dlat := (lat2 - lat1) * rad
	dlon := (lon2 - lon1) * rad
	a := math.Sin(dlat/2)*math.Sin(dlat/2) +
		math.Cos(lat1*rad)*math.Cos(lat2*rad)*math.Sin(dlon/2)*math.Sin(dlon/2)
	return 2 * r * math.Asin(math.Sqrt(a))
}

// round4 rounds a coordinate to 4 decimals (about 11 m), so that the
// shortest decimal form has at most 4 decimals.
func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }

// ipv4 formats a synthetic address in country c's block: the first octet is
// 20+9c, which spreads the 20 countries over 20..191 and keeps clear of 0,
// 10, 100, 127 and 172; low gives the other three octets.
func ipv4(c int, low uint32) string {
	b := make([]byte, 0, 15)
	b = strconv.AppendUint(b, uint64(20+9*c), 10)
	for shift := 16; shift >= 0; shift -= 8 {
		b = append(b, '.')
		v := byte(low >> shift)
		if shift == 0 && v == 0 {
			v = 1 // no network addresses
		}
		b = strconv.AppendUint(b, uint64(v), 10)
	}
	return string(b)
}
