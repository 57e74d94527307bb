package gen

import (
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/cepheus-cep/cepheus/event"
)

// Normal behaviour. An activity is one thing a customer does: a purchase
// (auth, then capture, sometimes a refund days later), a login, a transfer
// (login, then transfer), a new device (new_device, then login) or a
// password reset (password_reset, then login).

// Activity shares; they sum to 1.
const (
	pPurchase      = 0.78
	pLogin         = 0.14
	pTransfer      = 0.06
	pNewDevice     = 0.01
	pPasswordReset = 0.01
)

// Purchase shapes.
const (
	onlineShare        = 0.25  // purchases at online shops (the rest are card present, in the home city)
	foreignOnlineShare = 0.12  // of online purchases: at a shop in another country
	lateCaptureShare   = 0.003 // auths captured 1 h to 48 h later instead of within 10 minutes
	refundShare        = 0.008 // purchases refunded (in part) 1 to 10 days later
)

// hourWeights is the daily rhythm: the relative activity of a customer in
// each local hour. The generator thins a constant-rate stream of candidate
// activities by these weights at the customer's local time.
var hourWeights = [24]float64{
	0.25, 0.15, 0.10, 0.08, 0.08, 0.12, 0.30, 0.60, 0.90, 1.00, 1.10, 1.30,
	1.50, 1.40, 1.20, 1.10, 1.20, 1.40, 1.60, 1.60, 1.40, 1.10, 0.80, 0.50,
}

const maxHourWeight = 1.6

// meanEventsPerActivity is the mean number of events of a normal activity.
func meanEventsPerActivity() float64 {
	return pPurchase*(2+refundShare) + pLogin + 2*(pTransfer+pNewDevice+pPasswordReset)
}

// meanAcceptance is the share of candidate activities the daily rhythm
// keeps, averaged over a day.
func meanAcceptance() float64 {
	var sum float64
	for _, w := range hourWeights {
		sum += w
	}
	return sum / 24 / maxHourWeight
}

// logNormalCents draws an amount with the given median and log sigma,
// rounded to cents and kept within 0.50 .. 50,000.00.
func logNormalCents(rnd *rand.Rand, median, sigma float64) int64 {
	c := int64(math.Round(median * math.Exp(sigma*rnd.NormFloat64()) * 100))
	return min(max(c, 50), 5_000_000)
}

// between returns a uniform integer in [lo, hi]: a duration in ms or an
// amount in cents.
func between(rnd *rand.Rand, lo, hi int64) int64 { return lo + rnd.Int64N(hi-lo+1) }

// otherCountry returns a country other than not, uniformly.
func otherCountry(rnd *rand.Rand, not int) int {
	c := rnd.IntN(len(countries) - 1)
	if c >= not {
		c++
	}
	return c
}

func (r *run) normalActivity(ts int64) {
	rnd := r.normal
	rank := r.custZipf.Uint64()
	local := ((ts+int64(r.p.rankOffset[rank]))%day + day) % day
	if rnd.Float64()*maxHourWeight >= hourWeights[local/hour] {
		return
	}
	c := &r.p.customers[r.p.byRank[rank]]
	switch x := rnd.Float64(); {
	case x < pPurchase:
		r.normalPurchase(ts, c)
	case x < pPurchase+pLogin:
		r.account(ts, tLogin, c, usual(rnd, c), 0, scenNone)
	case x < pPurchase+pLogin+pTransfer:
		a := usual(rnd, c)
		r.account(ts, tLogin, c, a, 0, scenNone)
		r.account(ts+between(rnd, 30*second, 5*minute), tTransfer, c, a, logNormalCents(rnd, 150, 1.0), scenNone)
	case x < pPurchase+pLogin+pTransfer+pNewDevice:
		a := usual(rnd, c)
		a.device = r.newDevice()
		r.account(ts, tNewDevice, c, a, 0, scenNone)
		r.account(ts+between(rnd, 5*second, minute), tLogin, c, a, 0, scenNone)
	default:
		a := usual(rnd, c)
		r.account(ts, tPasswordReset, c, a, 0, scenNone)
		r.account(ts+between(rnd, minute, 15*minute), tLogin, c, a, 0, scenNone)
	}
}

// actor is who does an online thing: a device, an IP and where it is.
type actor struct {
	device   string
	ip       string
	country  int
	lat, lon float64
}

// usual returns one of the customer's own devices and IPs, at home.
func usual(rnd *rand.Rand, c *customer) actor {
	a := actor{device: c.devices[0], ip: c.ips[0], country: c.country, lat: c.lat, lon: c.lon}
	if n := len(c.devices); n > 1 {
		a.device = c.devices[rnd.IntN(n)]
	}
	if n := len(c.ips); n > 1 {
		a.ip = c.ips[rnd.IntN(n)]
	}
	return a
}

func (r *run) newDevice() string {
	r.devices++
	return "dev_" + strconv.Itoa(r.devices)
}

// account pushes an account event: no card, no merchant, and an amount
// only for transfers.
func (r *run) account(ts int64, typ uint8, c *customer, a actor, cents int64, scen uint8) {
	rec := r.newRecord()
	rec.Time = event.Time(ts)
	rec.typ, rec.Type = typ, typeNames[typ]
	rec.CustomerID = c.id
	rec.DeviceID, rec.IP, rec.IPCountry = a.device, a.ip, countries[a.country].code
	rec.Lat, rec.Lon = a.lat, a.lon
	if cents > 0 {
		rec.Cents, rec.Currency = cents, Currency
	}
	rec.label(scen)
	r.push(rec)
}

func (rec *Record) label(scen uint8) {
	rec.scen = scen
	if scen != scenNone {
		rec.Fraud, rec.Scenario = true, scenarioNames[scen]
	}
}

// txn is one card transaction: its auth, capture and refunds share these.
type txn struct {
	c      *customer
	card   int32
	m      int32
	online bool
	a      actor // for online transactions
	scen   uint8
}

// cardEvent pushes an auth, capture or refund of x.
func (r *run) cardEvent(ts int64, typ uint8, x *txn, cents int64) {
	p := r.p
	m := &p.merchants[x.m]
	rec := r.newRecord()
	rec.Time = event.Time(ts)
	rec.typ, rec.Type = typ, typeNames[typ]
	rec.CustomerID = x.c.id
	k := &p.cards[x.card]
	rec.CardID, rec.CardCountry = k.id, countries[k.country].code
	rec.Cents, rec.Currency = cents, Currency
	rec.MerchantID, rec.MerchantCountry, rec.MCC = m.id, countries[m.country].code, categories[m.category].mcc
	if x.online {
		// Online, the event happens where the buyer is. Only the auth
		// carries the buyer's device: the merchant sends captures and
		// refunds.
		if typ == tAuth {
			rec.DeviceID, rec.IP, rec.IPCountry = x.a.device, x.a.ip, countries[x.a.country].code
		}
		rec.Lat, rec.Lon = x.a.lat, x.a.lon
	} else {
		rec.Lat, rec.Lon = m.lat, m.lon
	}
	rec.label(x.scen)
	r.push(rec)
}

// capture pushes the capture of an auth at ts, 30 s to 10 minutes later
// (but before the end, so that the tail of a run has no spurious
// uncaptured auths).
func (r *run) capture(rnd *rand.Rand, ts int64, x *txn, cents int64) {
	t := ts + between(rnd, 30*second, 10*minute)
	if t >= r.g.end {
		t = ts + (r.g.end-ts)/2
	}
	r.cardEvent(t, tCapture, x, cents)
}

func (r *run) normalPurchase(ts int64, c *customer) {
	rnd := r.normal
	p := r.p
	x := txn{c: c, card: c.cards[0]}
	if n := len(c.cards); n > 1 {
		x.card = c.cards[rnd.IntN(n)]
	}
	if rnd.Float64() < onlineShare {
		country := c.country
		if rnd.Float64() < foreignOnlineShare {
			country = otherCountry(rnd, c.country)
		}
		x.m = p.onlineShops[country][r.onlineZipf[country].Uint64()]
		x.online = true
		x.a = usual(rnd, c)
	} else {
		x.m = p.shops[c.city][r.shopZipf[c.city].Uint64()]
	}
	cat := &categories[p.merchants[x.m].category]
	cents := logNormalCents(rnd, cat.median, cat.sigma)
	r.cardEvent(ts, tAuth, &x, cents)
	if rnd.Float64() < lateCaptureShare {
		r.cardEvent(ts+between(rnd, hour, 48*hour), tCapture, &x, cents)
	} else {
		r.capture(rnd, ts, &x, cents)
	}
	if rnd.Float64() < refundShare {
		part := max(1, int64(float64(cents)*(0.2+0.8*rnd.Float64())))
		r.cardEvent(ts+between(rnd, day, 10*day), tRefund, &x, part)
	}
}

// dormantLastUse is the last purchase on a dormant card before it goes
// idle: card present, in the home city, captured.
func (r *run) dormantLastUse(ts int64, card int32) {
	rnd := r.dormantRnd
	p := r.p
	c := &p.customers[p.cards[card].customer]
	shops := p.shops[c.city]
	x := txn{c: c, card: card, m: shops[rnd.IntN(len(shops))]}
	cat := &categories[p.merchants[x.m].category]
	cents := logNormalCents(rnd, cat.median, cat.sigma)
	r.cardEvent(ts, tAuth, &x, cents)
	r.capture(rnd, ts, &x, cents)
}
