package gen

import "math/rand/v2"

// scenarioSpan is the longest an instance of each scenario lasts, in ms,
// captures included. An instance starts only when it ends before the end
// of the run, so no instance is cut short.
var scenarioSpan = [numScenarios]int64{
	scenCardTesting:      30 * minute,
	scenAccountTakeover:  hour,
	scenImpossibleTravel: 75 * minute,
	scenLargeThenForeign: 30 * minute,
	scenRefundAbuse:      8 * hour,
	scenVelocityBurst:    15 * minute,
	scenDormantCard:      90 * minute,
	scenAuthNotCaptured:  45 * minute,
}

// instance injects one instance of scenario s starting at ts. Every event
// it makes carries the scenario's label. The victim is a uniformly chosen
// customer (fraud does not follow popularity) and one of its active cards,
// or the given card when card >= 0 (dormant_card).
func (r *run) instance(s int, rnd *rand.Rand, ts int64, card int32) {
	p := r.p
	r.stats.instances[s]++
	var c *customer
	if card >= 0 {
		c = &p.customers[p.cards[card].customer]
	} else {
		c = &p.customers[rnd.IntN(len(p.customers))]
		card = c.cards[rnd.IntN(len(c.cards))]
	}
	x := txn{c: c, card: card, scen: uint8(s)}
	// purchase pushes an auth at t and, when captured, its capture.
	purchase := func(t, cents int64, captured bool) {
		r.cardEvent(t, tAuth, &x, cents)
		if captured {
			r.capture(rnd, t, &x, cents)
		}
	}
	switch s {
	case scenCardTesting:
		// Small online auths, never captured (declined), then a large one.
		x.online, x.a = true, r.attacker(rnd, c.country)
		var sites [3]int32
		for i := range sites {
			sites[i] = r.anyOnline(rnd)
		}
		nsites := 1 + rnd.IntN(len(sites))
		t := ts
		for i := range 5 + rnd.IntN(16) {
			if i > 0 {
				t += between(rnd, 3*second, 30*second)
			}
			x.m = sites[rnd.IntN(nsites)]
			purchase(t, between(rnd, 50, 199), false)
		}
		t += between(rnd, 30*second, 5*minute)
		x.m = r.anyOnline(rnd)
		purchase(t, between(rnd, 500_01, 3000_00), true)

	case scenAccountTakeover:
		a := r.attacker(rnd, c.country)
		r.account(ts, tPasswordReset, c, a, 0, x.scen)
		t := ts + between(rnd, minute, 10*minute)
		r.account(t, tNewDevice, c, a, 0, x.scen)
		t += between(rnd, 5*second, 30*second)
		r.account(t, tLogin, c, a, 0, x.scen)
		t += between(rnd, 5*minute, 45*minute)
		r.account(t, tTransfer, c, a, between(rnd, 1000_00, 9000_00), x.scen)

	case scenImpossibleTravel:
		x.m = pickShop(rnd, p.shops[c.city])
		purchase(ts, r.categoryCents(rnd, x.m), true)
		far := farCities[c.city]
		x.m = pickShop(rnd, p.shops[far[rnd.IntN(len(far))]])
		purchase(ts+between(rnd, 5*minute, 55*minute), r.categoryCents(rnd, x.m), true)

	case scenLargeThenForeign:
		shops := p.highTicket[c.city]
		if len(shops) == 0 {
			shops = p.shops[c.city]
		}
		x.m = pickShop(rnd, shops)
		purchase(ts, between(rnd, 2000_01, 8000_00), true)
		// Foreign to the card, and to the customer too.
		issuer := p.cards[card].country
		fc := otherCountry(rnd, issuer)
		for fc == c.country {
			fc = otherCountry(rnd, issuer)
		}
		x.online, x.a = true, r.attackerIn(rnd, fc)
		x.m = pickShop(rnd, p.onlineShops[fc])
		purchase(ts+between(rnd, minute, 9*minute), r.categoryCents(rnd, x.m), true)

	case scenRefundAbuse:
		// Refunds larger than the purchase, or with no purchase at all.
		x.m = pickShop(rnd, p.shops[c.city])
		t := ts
		if rnd.IntN(2) == 0 {
			purchase(t, between(rnd, 10_00, 60_00), true)
			t += between(rnd, 10*minute, hour)
		}
		for i := range 3 + rnd.IntN(4) {
			if i > 0 {
				t += between(rnd, 10*minute, 80*minute)
			}
			r.cardEvent(t, tRefund, &x, between(rnd, 80_00, 600_00))
		}

	case scenVelocityBurst:
		// 10 to 20 captured online auths within 4.5 minutes.
		x.online = true
		if rnd.IntN(2) == 0 {
			x.a = r.attacker(rnd, c.country)
		} else {
			x.a = r.attackerIn(rnd, c.country)
		}
		n := 10 + rnd.IntN(11)
		maxGap := 270 * second / int64(n-1)
		t := ts
		for i := range n {
			if i > 0 {
				t += between(rnd, 3*second, maxGap)
			}
			x.m = r.anyOnline(rnd)
			purchase(t, r.categoryCents(rnd, x.m), true)
		}

	case scenDormantCard:
		x.online, x.a = true, r.attacker(rnd, c.country)
		t := ts
		for i := range 3 + rnd.IntN(6) {
			if i > 0 {
				t += between(rnd, minute, 10*minute)
			}
			x.m = r.anyOnline(rnd)
			purchase(t, between(rnd, 50_00, 900_00), true)
		}

	case scenAuthNotCaptured:
		x.m = pickShop(rnd, p.shops[c.city])
		t := ts
		for i := range 1 + rnd.IntN(3) {
			if i > 0 {
				t += between(rnd, minute, 5*minute)
			}
			purchase(t, between(rnd, 100_00, 2000_00), false)
		}
	}
}

// attacker returns a fraudster's new device and IP in a country other than
// home.
func (r *run) attacker(rnd *rand.Rand, home int) actor {
	return r.attackerIn(rnd, otherCountry(rnd, home))
}

// attackerIn returns a fraudster's new device and IP in country c.
func (r *run) attackerIn(rnd *rand.Rand, c int) actor {
	cc := r.p.countryCities[c]
	city := &cities[cc[rnd.IntN(len(cc))]]
	return actor{
		device:  r.newDevice(),
		ip:      ipv4(c, rnd.Uint32()),
		country: c,
		lat:     round4(city.lat + (rnd.Float64()*2-1)*0.1),
		lon:     round4(city.lon + (rnd.Float64()*2-1)*0.1),
	}
}

func (r *run) anyOnline(rnd *rand.Rand) int32 { return pickShop(rnd, r.p.online) }

func pickShop(rnd *rand.Rand, shops []int32) int32 { return shops[rnd.IntN(len(shops))] }

// categoryCents draws an ordinary amount for merchant m's category.
func (r *run) categoryCents(rnd *rand.Rand, m int32) int64 {
	cat := &categories[r.p.merchants[m].category]
	return logNormalCents(rnd, cat.median, cat.sigma)
}
