package gen

import (
	"context"
	"io"
	"iter"
	"os"
	"path/filepath"
	"strconv"
)

// The profiles: the lookup data of the population, what the lookup blocks
// of rulesets/cards.cep bind. Each lookup gets one JSON-lines file, one line
// per key. The profiles depend only on Seed and Customers, never on
// Merchants or the traffic knobs, and drawing them uses a stream of its
// own, so the events do not change.

// CustomerProfile is the lookup data of one customer: a line of the
// customer lookup (key customer_id) of rulesets/cards.cep.
type CustomerProfile struct {
	// CustomerID is the customer, as the events' customer_id ("cust_" and
	// a number).
	CustomerID string
	// HomeCountry is the customer's home country, ISO 3166-1 alpha-2 as in
	// the events' merchant_country and card_country: where the customer's
	// card-present purchases, logins and usual IPs are.
	HomeCountry string
	// RiskTier is "low" (80% of customers), "medium" (15%) or "high" (5%).
	// It is drawn independently of everything else: fraud scenarios pick
	// their victims without looking at it.
	RiskTier string
	// TenureDays is how long the customer has been one, in days: uniform
	// in 1..3650, independent of RiskTier.
	TenureDays int
}

// Risk tiers and their shares.
const (
	highRiskShare   = 0.05
	mediumRiskShare = 0.15
	maxTenureDays   = 3650
)

// CustomerProfiles returns the profile of every customer of the
// population, in customer id order (cust_1, cust_2, ...). Each iteration
// starts from the seed and gives the same profiles; customer i's profile
// does not depend on the number of customers after it. It reads the
// immutable population only, so it may run concurrently with other runs.
func (g *Generator) CustomerProfiles() iter.Seq[CustomerProfile] {
	return func(yield func(CustomerProfile) bool) {
		r := newRand(g.cfg.Seed, streamProfiles)
		for i := range g.pop.customers {
			c := &g.pop.customers[i]
			p := CustomerProfile{CustomerID: c.id, HomeCountry: countries[c.country].code, RiskTier: "low"}
			switch x := r.Float64(); {
			case x < highRiskShare:
				p.RiskTier = "high"
			case x < highRiskShare+mediumRiskShare:
				p.RiskTier = "medium"
			}
			p.TenureDays = 1 + r.IntN(maxTenureDays)
			if !yield(p) {
				return
			}
		}
	}
}

// AppendJSON appends p to b as one JSON line, keys in lookup order:
// {"customer_id":"cust_123","home_country":"FR","risk_tier":"low","tenure_days":812}.
func (p *CustomerProfile) AppendJSON(b []byte) []byte {
	b = append(b, `{"customer_id":`...)
	b = appendString(b, p.CustomerID)
	b = append(b, `,"home_country":`...)
	b = appendString(b, p.HomeCountry)
	b = append(b, `,"risk_tier":`...)
	b = appendString(b, p.RiskTier)
	b = append(b, `,"tenure_days":`...)
	b = strconv.AppendInt(b, int64(p.TenureDays), 10)
	return append(b, "}\n"...)
}

// WriteCustomerProfiles writes [Generator.CustomerProfiles] to w as JSON
// lines (see [CustomerProfile.AppendJSON]) and returns the number of lines
// written. It buffers about 64 KiB between writes and checks ctx every few
// thousand lines; on error (ctx's or w's) it stops and returns it.
func (g *Generator) WriteCustomerProfiles(ctx context.Context, w io.Writer) (int, error) {
	const flushAt = 60 << 10
	buf := make([]byte, 0, flushAt+1<<10)
	n := 0
	for p := range g.CustomerProfiles() {
		if n&4095 == 0 {
			if err := ctx.Err(); err != nil {
				return n, err
			}
		}
		buf = p.AppendJSON(buf)
		n++
		if len(buf) >= flushAt {
			if _, err := w.Write(buf); err != nil {
				return n, err
			}
			buf = buf[:0]
		}
	}
	if len(buf) > 0 {
		if _, err := w.Write(buf); err != nil {
			return n, err
		}
	}
	return n, nil
}

// profileFiles are the lookups of the profiles, in the order
// [Generator.WriteProfiles] writes them: the file name is the lookup's
// name and .jsonl.
var profileFiles = [...]struct {
	name  string
	write func(g *Generator, ctx context.Context, w io.Writer) (int, error)
}{
	{"customer.jsonl", (*Generator).WriteCustomerProfiles},
}

// ProfileFiles returns the names of the files [Generator.WriteProfiles]
// writes in its directory.
func ProfileFiles() []string {
	var names []string
	for _, pf := range profileFiles {
		names = append(names, pf.name)
	}
	return names
}

// WriteProfiles creates dir (and its parents, as [os.MkdirAll]) and writes
// in it one JSON-lines file per lookup of rulesets/cards.cep, replacing
// files of the same name: customer.jsonl ([Generator.WriteCustomerProfiles]).
// It returns the paths written (dir joined with the file name), in that
// order. On error (ctx's, or the file system's) it removes the file it was
// writing and returns the paths written before it with the error.
func (g *Generator) WriteProfiles(ctx context.Context, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	for _, pf := range profileFiles {
		path := filepath.Join(dir, pf.name)
		if err := writeFile(path, func(w io.Writer) error {
			_, err := pf.write(g, ctx, w)
			return err
		}); err != nil {
			return paths, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// writeFile creates path and writes it with write, which buffers; on
// error it removes the file.
func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path) // best effort: the write's error is the one to report
	}
	return err
}
