// Package enrich will perform asynchronous lookups that add fields to events
// before they are keyed: Redis through go-redis, with a timeout per request, a
// bounded number of requests in flight, pipelined batches and a TTL cache.
//
// This is a placeholder: the package has no code yet. Its code arrives with
// later issues, and until then nothing here should be relied on.
//
// # Invariants
//
//   - enrich knows nothing of runtime: it offers a lookup function over
//     events that runtime's async stage calls.
//   - The number of requests in flight is bounded, and every request has a
//     timeout.
//   - A failed lookup follows the rule's failure policy (fail open with
//     defaults, fail closed, or dead letter); it never panics.
//   - Unit tests use an in-process fake behind an interface; a real Redis
//     server is used only by gated integration tests.
//
// # Imports
//
// Package enrich may import, of ours, only event. It is the only package of
// the module that may import github.com/redis/go-redis. internal/lint
// enforces both rules.
package enrich
