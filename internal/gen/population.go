package gen

import (
	"math/rand/v2"
	"strconv"
)

// The population: customers, their cards, devices and usual IPs, and the
// merchants. It is built once by [New] from the seed and never changes, so
// runs can share it.
type population struct {
	customers []customer
	cards     []card
	merchants []merchant

	// Merchant indexes: card-present shops per city (and the high-ticket
	// ones among them, possibly none), online shops per country, and all
	// online shops.
	shops       [len(cities)][]int32
	highTicket  [len(cities)][]int32
	onlineShops [len(countries)][]int32
	online      []int32

	// byRank maps a Zipf rank to a customer, so the busiest customers are
	// spread over the id range instead of being cust_1, cust_2, ...
	// rankOffset is the UTC offset (ms) of the customer of each rank: the
	// daily rhythm rejects about 45% of candidate activities, and this
	// small array lets it do so without touching the customer.
	byRank     []int32
	rankOffset []int32

	// dormant lists the dormant cards. Normal traffic never uses them.
	dormant []int32

	// devices is the number of devices handed out; a run numbers new
	// devices from devices+1.
	devices int

	countryCities [len(countries)][]int
}

type customer struct {
	id       string
	country  int
	city     int
	lat, lon float64
	cards    []int32 // active cards, never empty
	devices  []string
	ips      []string // in the home country
}

type card struct {
	id       string
	customer int32
	country  int // issuing country
}

type merchant struct {
	id       string
	country  int
	city     int
	category int
	online   bool
	lat, lon float64
}

// Shares that shape the population.
const (
	expatCardShare = 0.02 // cards issued outside the holder's home country
	dormantShare   = 0.05 // of customers with two or more cards: the last one is dormant
)

// rng streams: one per purpose, so adding a scenario does not move the
// population.
const (
	streamPopulation = iota + 1
	streamNormal
	streamReorder
	streamDormantPlan
	streamScenario // + scenario index

	// streamProfiles draws the profiles (profiles.go). It sits above the
	// scenarios' streams, with room for more scenarios: adding one changes
	// neither the profiles nor the events.
	streamProfiles = 64
)

// The scenarios' streams stay below streamProfiles: a compile error here
// means streamProfiles must move up (which changes the profiles of a seed).
var _ [streamProfiles - streamScenario - numScenarios]struct{}

func newRand(seed uint64, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15*stream))
}

// pick returns an index with probability proportional to its weight.
func pick(r *rand.Rand, weights []float64, total float64) int {
	x := r.Float64() * total
	for i, w := range weights {
		if x < w {
			return i
		}
		x -= w
	}
	return len(weights) - 1
}

func buildPopulation(cfg *Config) *population {
	r := newRand(cfg.Seed, streamPopulation)
	p := &population{}
	for i, c := range cities {
		p.countryCities[c.country] = append(p.countryCities[c.country], i)
	}
	countryW := make([]float64, len(countries))
	var countryTotal float64
	for i, c := range countries {
		countryW[i] = c.weight
		countryTotal += c.weight
	}
	jitter := func(x, maxDeg float64) float64 { return round4(x + (r.Float64()*2-1)*maxDeg) }

	p.customers = make([]customer, cfg.Customers)
	for i := range p.customers {
		c := &p.customers[i]
		c.id = "cust_" + strconv.Itoa(i+1)
		c.country = pick(r, countryW, countryTotal)
		cc := p.countryCities[c.country]
		c.city = cc[r.IntN(len(cc))]
		c.lat = jitter(cities[c.city].lat, 0.15)
		c.lon = jitter(cities[c.city].lon, 0.15)
		ncards := 1
		if x := r.Float64(); x < 0.15 {
			ncards = 3
		} else if x < 0.5 {
			ncards = 2
		}
		dormantLast := ncards > 1 && r.Float64() < dormantShare
		for k := range ncards {
			id := int32(len(p.cards))
			issuer := c.country
			if r.Float64() < expatCardShare {
				issuer = r.IntN(len(countries))
			}
			p.cards = append(p.cards, card{id: "card_" + strconv.Itoa(int(id)+1), customer: int32(i), country: issuer})
			if dormantLast && k == ncards-1 {
				p.dormant = append(p.dormant, id)
			} else {
				c.cards = append(c.cards, id)
			}
		}
		for range 1 + r.IntN(3) {
			p.devices++
			c.devices = append(c.devices, "dev_"+strconv.Itoa(p.devices))
		}
		for range 1 + r.IntN(2) {
			c.ips = append(c.ips, ipv4(c.country, r.Uint32()))
		}
	}
	p.byRank = make([]int32, cfg.Customers)
	p.rankOffset = make([]int32, cfg.Customers)
	for i, k := range r.Perm(cfg.Customers) {
		p.byRank[i] = int32(k)
		p.rankOffset[i] = int32(cities[p.customers[k].city].utcOffset * minute)
	}

	catW := make([]float64, len(categories))
	var catTotal float64
	for i, c := range categories {
		catW[i] = c.weight
		catTotal += c.weight
	}
	p.merchants = make([]merchant, cfg.Merchants)
	for i := range p.merchants {
		m := &p.merchants[i]
		m.id = "merch_" + strconv.Itoa(i+1)
		switch {
		case i < len(cities): // one shop per city
			m.city = i
			m.country = cities[i].country
			for m.category = pick(r, catW, catTotal); categories[m.category].online == 1; {
				m.category = pick(r, catW, catTotal)
			}
		case i < len(cities)+len(countries): // one online shop per country
			m.country = i - len(cities)
			cc := p.countryCities[m.country]
			m.city = cc[r.IntN(len(cc))]
			for m.category = pick(r, catW, catTotal); categories[m.category].online == 0; {
				m.category = pick(r, catW, catTotal)
			}
			m.online = true
		default:
			m.country = pick(r, countryW, countryTotal)
			cc := p.countryCities[m.country]
			m.city = cc[r.IntN(len(cc))]
			m.category = pick(r, catW, catTotal)
			m.online = r.Float64() < categories[m.category].online
		}
		m.lat = jitter(cities[m.city].lat, 0.1)
		m.lon = jitter(cities[m.city].lon, 0.1)
		if m.online {
			p.onlineShops[m.country] = append(p.onlineShops[m.country], int32(i))
			p.online = append(p.online, int32(i))
		} else {
			p.shops[m.city] = append(p.shops[m.city], int32(i))
			if categories[m.category].highTicket {
				p.highTicket[m.city] = append(p.highTicket[m.city], int32(i))
			}
		}
	}
	return p
}
