package auth

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// DefaultRate is the default rate limit per token identity, in requests
// per second; the serve command's default burst is twice the rate in
// force.
const DefaultRate = 1000

// Limiter is a token bucket per principal name. Buckets idle long enough
// to have refilled are forgotten, so the map stays as small as the set of
// recently active tokens.
type Limiter struct {
	rate  rate.Limit
	burst int
	now   func() time.Time

	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

// NewLimiter allows perSecond requests a second with bursts of burst per
// name. perSecond <= 0 disables limiting (Allow always succeeds).
func NewLimiter(perSecond float64, burst int, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	if burst < 1 {
		burst = 1
	}
	return &Limiter{rate: rate.Limit(perSecond), burst: burst, now: now, buckets: map[string]*bucket{}}
}

// refill is how long an idle bucket takes to fill up again: after it, a
// forgotten bucket and a fresh one are the same.
func (l *Limiter) refill() time.Duration {
	return time.Duration(float64(l.burst) / float64(l.rate) * float64(time.Second))
}

// Allow takes one token from name's bucket. When the bucket is empty it
// returns false and how long until a token is there.
func (l *Limiter) Allow(name string) (bool, time.Duration) {
	if l == nil || l.rate <= 0 {
		return true, 0
	}
	return l.allow(name, l.now())
}

// allow is Allow at now.
func (l *Limiter) allow(name string, now time.Time) (bool, time.Duration) {
	if l == nil || l.rate <= 0 {
		return true, 0
	}
	l.mu.Lock()
	b, ok := l.buckets[name]
	if !ok {
		b = &bucket{lim: rate.NewLimiter(l.rate, l.burst)}
		l.buckets[name] = b
	}
	b.seen = now
	l.sweep(now)
	l.mu.Unlock()

	r := b.lim.ReserveN(now, 1)
	if !r.OK() {
		return false, time.Second
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// sweep forgets buckets idle for longer than their refill time, at most
// once per refill time. l.mu is held.
func (l *Limiter) sweep(now time.Time) {
	idle := l.refill()
	if idle < time.Second {
		idle = time.Second
	}
	if now.Sub(l.lastSweep) < idle {
		return
	}
	l.lastSweep = now
	for k, b := range l.buckets {
		if now.Sub(b.seen) > idle {
			delete(l.buckets, k)
		}
	}
}

// Len is the number of buckets held.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

// RetryAfterSeconds rounds a wait up to whole seconds, at least 1, as
// Retry-After wants.
func RetryAfterSeconds(d time.Duration) int {
	s := int(math.Ceil(d.Seconds()))
	if s < 1 {
		s = 1
	}
	return s
}
