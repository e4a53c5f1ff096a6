// Package store holds the state that Maat shares between requests and, with
// Redis, between nodes: single-use marks (challenge tokens that must not be
// replayed), token buckets (rate limits), blobs (the certificate cache) and
// locks (so that one node orders a certificate while the others wait and read
// it).
//
// Three implementations have the same behaviour: [Memory], for one node,
// bounded in size and swept of expired entries; [Redis], for many nodes
// sharing a Redis or Valkey server through github.com/redis/go-redis/v9; and
// [Resilient], a Redis store that falls back to a Memory store while Redis is
// away (each call bounded by a short timeout), says so through
// [Resilient.Health] and a callback, and writes back what changed meanwhile
// when Redis returns, so that no request fails because Redis is down.
//
// The Redis mapping follows the Redis command reference
// (https://redis.io/docs/latest/commands/):
//
//   - MarkOnce is SET key 1 NX PX ttl: the first caller sets the key, every
//     later caller until the expiry finds it set.
//   - Take runs one Lua script (EVALSHA) that reads the bucket hash, refills it
//     from the server clock (TIME), takes a token and writes it back with
//     PEXPIRE set to the moment the bucket is full again; scripts run
//     atomically, so concurrent nodes never take the same token.
//   - Get, Put and Delete are GET, SET and DEL.
//   - Lock is SET NX PX with a random value, retried until acquired; unlock
//     deletes the key only if it still holds that value (one Lua script), the
//     single-instance lock of https://redis.io/docs/latest/develop/use/patterns/distributed-locks/.
//     While held, the lock is renewed every third of its ttl by a
//     compare-and-extend script (PEXPIRE only if the key still holds the
//     value), so a lock outlives a long ACME order; when its owner's context
//     ends, or the owner dies, renewal stops and the lock expires within
//     ttl.
//
// [Sealed] wraps a store so that its blobs are sealed with AES-256-GCM
// under a key the nodes share, with the blob's Redis key as additional
// data: Redis then holds no secret in the clear, and a value moved to
// another key, or altered, does not open. Marks, buckets and locks pass
// through. The format is versioned ("maat-sealed-v1:", a key id, the
// nonce, the ciphertext); values written before sealing are refused as
// ErrNotSealed unless the caller lets them be read once and sealed
// (SealConfig.Plain).
//
// Keys are namespaced by kind ("maat:mark:", "maat:rate:", "maat:blob:",
// "maat:lock:"), so a mark, a bucket, a blob and a lock of the same name are
// distinct, in Redis as in memory.
//
// The token bucket is the classic one: a bucket holds at most burst tokens,
// starts full, refills at rate tokens per second, and each Take removes one
// token; when less than one token is left, Take refuses and says how long until
// a token is available.
package store
