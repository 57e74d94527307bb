package enrich

import "github.com/cepheus-cep/cepheus/event"

// cache is a size-bounded TTL cache of lookup results by key: records and
// "no record" alike, both stored as the values an event gets (nulls already
// replaced by the defaults). When full, it evicts the least recently used
// entry; an expired entry is a miss, and stays until it is replaced or
// evicted. It is used by one goroutine (the one running Enrich).
type cache struct {
	max   int
	ttl   int64 // nanoseconds
	index map[string]int32
	ents  []centry
	// head and tail are the most and least recently used entries of the
	// list through centry.prev/next; -1 when the cache is empty.
	head, tail int32
}

// centry is one entry of a cache.
type centry struct {
	key     string
	vals    []event.Value // what an event gets: the record's values or the defaults
	found   bool          // the source had a record
	expires int64         // Unix nanoseconds
	// batch is the Enrich call that last counted this entry as a hit, so
	// that a key counts once per batch.
	batch      uint64
	prev, next int32
}

func newCache(max int, ttl int64) *cache {
	return &cache{max: max, ttl: ttl, index: make(map[string]int32), head: -1, tail: -1}
}

// get returns the live entry of key at now (Unix nanoseconds), made the most
// recently used, or nil. It does not allocate.
func (c *cache) get(key []byte, now int64) *centry {
	i, ok := c.index[string(key)]
	if !ok {
		return nil
	}
	e := &c.ents[i]
	if now >= e.expires {
		return nil
	}
	c.moveToFront(i)
	return e
}

// put stores vals under key until now+ttl, replacing an entry of key and
// evicting the least recently used entry when the cache is full.
func (c *cache) put(key string, vals []event.Value, found bool, now int64) {
	i, ok := c.index[key]
	switch {
	case ok:
		c.unlink(i)
	case len(c.ents) < c.max:
		i = int32(len(c.ents))
		c.ents = append(c.ents, centry{})
		c.index[key] = i
	default:
		i = c.tail
		c.unlink(i)
		delete(c.index, c.ents[i].key)
		c.index[key] = i
	}
	c.ents[i] = centry{key: key, vals: vals, found: found, expires: now + c.ttl, prev: -1, next: -1}
	c.pushFront(i)
}

// len returns the number of entries, expired ones included.
func (c *cache) len() int { return len(c.index) }

func (c *cache) moveToFront(i int32) {
	if c.head == i {
		return
	}
	c.unlink(i)
	c.pushFront(i)
}

func (c *cache) unlink(i int32) {
	e := &c.ents[i]
	if e.prev >= 0 {
		c.ents[e.prev].next = e.next
	} else {
		c.head = e.next
	}
	if e.next >= 0 {
		c.ents[e.next].prev = e.prev
	} else {
		c.tail = e.prev
	}
	e.prev, e.next = -1, -1
}

func (c *cache) pushFront(i int32) {
	e := &c.ents[i]
	e.prev, e.next = -1, c.head
	if c.head >= 0 {
		c.ents[c.head].prev = i
	}
	c.head = i
	if c.tail < 0 {
		c.tail = i
	}
}
