package gen

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// profileLine is a decoded line of customer.jsonl.
type profileLine struct {
	CustomerID  string `json:"customer_id"`
	HomeCountry string `json:"home_country"`
	RiskTier    string `json:"risk_tier"`
	TenureDays  int    `json:"tenure_days"`
}

func writeProfiles(t testing.TB, g *Generator) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := g.WriteCustomerProfiles(context.Background(), &buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != g.cfg.Customers {
		t.Fatalf("WriteCustomerProfiles wrote %d lines, want %d", n, g.cfg.Customers)
	}
	return buf.Bytes()
}

func newGenerator(t testing.TB, cfg Config) *Generator {
	t.Helper()
	g, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// profileLineRE is one line, keys in the lookup's order.
var profileLineRE = regexp.MustCompile(`^\{"customer_id":"cust_[1-9][0-9]*","home_country":"[A-Z]{2}","risk_tier":"(low|medium|high)","tenure_days":[1-9][0-9]*\}$`)

func decodeProfiles(t testing.TB, out []byte) []profileLine {
	t.Helper()
	var ps []profileLine
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if !profileLineRE.Match(sc.Bytes()) {
			t.Fatalf("line %d: %s does not match %s", len(ps)+1, sc.Bytes(), profileLineRE)
		}
		var p profileLine
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("line %d: %v: %s", len(ps)+1, err, sc.Bytes())
		}
		ps = append(ps, p)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return ps
}

// TestGenProfilesDeterministic: the profiles are a function of Seed and
// Customers, the same whatever the merchants and the traffic knobs.
func TestGenProfilesDeterministic(t *testing.T) {
	cfg := testConfig()
	a := writeProfiles(t, newGenerator(t, cfg))
	if b := writeProfiles(t, newGenerator(t, cfg)); !bytes.Equal(a, b) {
		t.Fatal("two generators of one config write different profiles")
	}
	g := newGenerator(t, cfg)
	if b, c := writeProfiles(t, g), writeProfiles(t, g); !bytes.Equal(a, b) || !bytes.Equal(b, c) {
		t.Fatal("two writes of one generator differ")
	}

	traffic := cfg
	traffic.HistoryDays, traffic.Days, traffic.EventsPerDay, traffic.HistoryEventsPerDay = 0, 3, 500, 0
	traffic.MaxDelay, traffic.Skew = 0, 2
	traffic.Scenarios = map[string]float64{"card_testing": 7}
	traffic.Merchants = MinMerchants
	if b := writeProfiles(t, newGenerator(t, traffic)); !bytes.Equal(a, b) {
		t.Error("the traffic knobs change the profiles")
	}

	// A bigger population keeps the profiles of the first customers.
	bigger := cfg
	bigger.Customers *= 2
	if b := writeProfiles(t, newGenerator(t, bigger)); !bytes.HasPrefix(b, a) {
		t.Error("doubling the customers changes the profiles of the first ones")
	}

	other := cfg
	other.Seed++
	if b := writeProfiles(t, newGenerator(t, other)); bytes.Equal(a, b) {
		t.Error("different seeds give the same profiles")
	}
}

// TestGenProfilesCoverEvents: one line per customer, in customer id order,
// and every customer_id of the events has exactly one.
func TestGenProfilesCoverEvents(t *testing.T) {
	cfg := testConfig()
	ps := decodeProfiles(t, writeProfiles(t, newGenerator(t, cfg)))
	if len(ps) != cfg.Customers {
		t.Fatalf("%d profiles, want %d", len(ps), cfg.Customers)
	}
	lines := make(map[string]int, len(ps))
	for i, p := range ps {
		if want := "cust_" + strconv.Itoa(i+1); p.CustomerID != want {
			t.Fatalf("line %d is %s, want %s", i+1, p.CustomerID, want)
		}
		lines[p.CustomerID]++
	}
	seen := map[string]bool{}
	for _, l := range sharedLines() {
		if lines[l.CustomerID] != 1 && !seen[l.CustomerID] {
			t.Errorf("customer %s of event %s has %d profile lines, want 1", l.CustomerID, l.EventID, lines[l.CustomerID])
		}
		seen[l.CustomerID] = true
	}
	if len(seen) < cfg.Customers/2 {
		t.Errorf("only %d of %d customers have events: the check above proves little", len(seen), cfg.Customers)
	}
}

// TestGenProfilesHomeCountry: home_country is the population's, and it is
// where the customer's normal card-present auths and logins are.
func TestGenProfilesHomeCountry(t *testing.T) {
	g := newGenerator(t, testConfig())
	home := map[string]string{}
	i := 0
	for p := range g.CustomerProfiles() {
		c := &g.pop.customers[i]
		if p.CustomerID != c.id || p.HomeCountry != countries[c.country].code {
			t.Fatalf("profile %d is %s in %s, the population's customer %s in %s", i+1, p.CustomerID, p.HomeCountry, c.id, countries[c.country].code)
		}
		home[p.CustomerID] = p.HomeCountry
		i++
	}
	var present, logins int
	for _, l := range sharedLines() {
		if l.Scenario != "" {
			continue
		}
		switch {
		case l.Type == "auth" && l.DeviceID == "":
			present++
			if l.MerchantCountry != home[l.CustomerID] {
				t.Errorf("normal card-present auth %s of %s in %s, home %s", l.EventID, l.CustomerID, l.MerchantCountry, home[l.CustomerID])
			}
		case l.Type == "login":
			logins++
			if l.IPCountry != home[l.CustomerID] {
				t.Errorf("normal login %s of %s from %s, home %s", l.EventID, l.CustomerID, l.IPCountry, home[l.CustomerID])
			}
		}
	}
	if present < 1000 || logins < 1000 {
		t.Errorf("%d card-present auths and %d logins: too few to check", present, logins)
	}
}

// TestGenProfilesShares: the tiers are near 80/15/5 and the tenures uniform
// in 1..3650 on a large population.
func TestGenProfilesShares(t *testing.T) {
	cfg := testConfig()
	cfg.Customers = 200_000
	g := newGenerator(t, cfg)
	tiers := map[string]int{}
	lo, hi, sum := math.MaxInt, 0, 0
	byTier := map[string]int{} // sum of tenures
	for p := range g.CustomerProfiles() {
		tiers[p.RiskTier]++
		lo, hi, sum = min(lo, p.TenureDays), max(hi, p.TenureDays), sum+p.TenureDays
		byTier[p.RiskTier] += p.TenureDays
	}
	n := float64(cfg.Customers)
	for tier, want := range map[string]float64{"low": 0.80, "medium": 0.15, "high": 0.05} {
		// 4 standard deviations of a binomial share.
		if got, tol := float64(tiers[tier])/n, 4*math.Sqrt(want*(1-want)/n); math.Abs(got-want) > tol {
			t.Errorf("risk_tier %s: %.4f of customers, want %.2f ± %.4f", tier, got, want, tol)
		}
		if mean := float64(byTier[tier]) / float64(tiers[tier]); math.Abs(mean-1825.5) > 40 {
			t.Errorf("risk_tier %s: mean tenure %.1f days, want about 1825.5 (independent of the tier)", tier, mean)
		}
	}
	if len(tiers) != 3 {
		t.Errorf("tiers %v, want low, medium and high", tiers)
	}
	if lo != 1 || hi != maxTenureDays {
		t.Errorf("tenure_days in %d..%d, want 1..%d", lo, hi, maxTenureDays)
	}
	if mean := float64(sum) / n; math.Abs(mean-1825.5) > 10 {
		t.Errorf("mean tenure %.1f days, want about 1825.5", mean)
	}
	t.Logf("tiers %v of %d; tenure %d..%d, mean %.1f", tiers, cfg.Customers, lo, hi, float64(sum)/n)
}

// TestGenProfilesLeaveEventsAlone: writing the profiles does not touch the
// events: a generator gives the same bytes before and after, and the same
// as one that never wrote profiles.
func TestGenProfilesLeaveEventsAlone(t *testing.T) {
	cfg := testConfig()
	cfg.HistoryDays, cfg.Scenarios["dormant_card"] = 0, 0
	events := func(g *Generator) [sha256.Size]byte {
		var buf bytes.Buffer
		if _, err := g.WriteTo(context.Background(), &buf); err != nil {
			t.Fatal(err)
		}
		return sha256.Sum256(buf.Bytes())
	}
	plain := events(newGenerator(t, cfg))
	g := newGenerator(t, cfg)
	writeProfiles(t, g)
	after := events(g)
	writeProfiles(t, g)
	if again := events(g); after != plain || again != plain {
		t.Errorf("events %x without profiles, %x and %x after writing them", plain, after, again)
	}
}

type shortWriter struct{ n int }

func (w *shortWriter) Write(b []byte) (int, error) {
	if w.n -= len(b); w.n < 0 {
		return 0, errWrite
	}
	return len(b), nil
}

func TestGenWriteCustomerProfilesErrors(t *testing.T) {
	g := newGenerator(t, testConfig())
	if _, err := g.WriteCustomerProfiles(context.Background(), &shortWriter{n: 10}); !errors.Is(err, errWrite) {
		t.Errorf("failing writer: %v, want %v", err, errWrite)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var buf bytes.Buffer
	if n, err := g.WriteCustomerProfiles(ctx, &buf); !errors.Is(err, context.Canceled) || n != 0 || buf.Len() != 0 {
		t.Errorf("canceled: %d lines, %d bytes, %v; want 0, 0, %v", n, buf.Len(), err, context.Canceled)
	}
}

// TestGenDocsListProfileFields: docs/data.md's table of customer.jsonl lists
// its fields in line order.
func TestGenDocsListProfileFields(t *testing.T) {
	doc, err := os.ReadFile("../../docs/data.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(doc), "## Profiles")
	if !ok {
		t.Fatal("docs/data.md has no Profiles section")
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| (string|int) \\|")
	var got []string
	for _, m := range row.FindAllStringSubmatch(sec, -1) {
		got = append(got, m[1]+" "+m[2])
	}
	want := []string{"customer_id string", "home_country string", "risk_tier string", "tenure_days int"}
	if strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("docs/data.md § Profiles lists %q, want %q", got, want)
	}
}
