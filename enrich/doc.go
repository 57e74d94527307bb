// Package enrich holds the lookups that add fields to events before they
// are keyed. A ruleset declares a lookup
//
//	lookup customer {
//	  key customer_id
//	  fields {
//	    home_country: string default ""
//	    risk_tier: string default "unknown"
//	    tenure_days: int default 0
//	  }
//	  on failure open        # or: closed, or: retry 3 then open|closed
//	}
//
// and conditions read customer.home_country. The engine (package cep) gives
// the lookup's fields event slots, builds a [Lookup] per declaration
// ([Spec], [LookupConfig]) and calls [Lookup.Enrich] (or [EnrichAll] for
// several) on each batch of decoded events before routing them.
//
// # What a lookup does
//
// The key of an event is built from its key fields ([KeyOf]); a null part
// means no lookup. The key goes through a size-bounded TTL cache (records
// and "no record" alike) to a [Source]: [MemSource] (in memory, for tests
// and embedding programs), [FileSource] (a JSON-lines file, [OpenFile]) or
// [RedisSource] (hashes or JSON strings in Redis, [OpenRedis]; [Load] fills
// Redis from a lookup file). The misses of a batch are deduplicated and
// fetched in requests of at most [LookupConfig.Batch] keys, at most
// [LookupConfig.InFlight] at once. The record's values go to the event's
// slots, a null one replaced by its field's default; a null key or a key
// without a record gives the defaults.
//
// A request that fails (an error, or no answer within the timeout) is tried
// again per its [Policy], then fails open (its events get the defaults) or
// closed (its events are rejected with a reason naming the lookup and the
// source). [Lookup.Stats] counts hits, misses, requests, failures and
// latencies, and keeps the error of the latest failed attempt (why the
// failures failed).
//
// # Invariants
//
//   - Every request has a timeout, and the requests of a lookup in flight at
//     once are bounded; go-redis neither retries nor redials behind the
//     Policy.
//   - A failure never panics and never fails Enrich: it follows the Policy.
//     Enrich returns an error only when its ctx is done.
//   - Nothing is cached from a failed request.
//   - Enrich does not allocate for events served by the cache.
//   - No String, error or rejection reason contains a Redis password.
//   - enrich knows nothing of runtime or of the rule language: it is given
//     slots, specs and events.
//
// # Tests
//
// Unit tests use [MemSource] and files; the Redis tests need a real server
// at CEPHEUS_REDIS_ADDR (host:port; scripts/redis.sh start prints one).
// Without it they skip, except under CI, where they fail.
//
// # Imports
//
// Package enrich may import, of ours, only event. It is the only package of
// the module that may import github.com/redis/go-redis. internal/lint
// enforces both rules.
package enrich
