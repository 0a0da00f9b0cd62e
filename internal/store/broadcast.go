package store

import "sync"

// Broadcast fans "activity may have been committed" out to the channels of
// store.ActivityStream.WatchActivity; both stores embed one.
type Broadcast struct {
	mu  sync.Mutex
	chs map[chan struct{}]struct{}
}

// Notify wakes every watcher without blocking: each channel holds at most
// one pending value, and a pending value already says "look again".
func (b *Broadcast) Notify() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.chs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Watch implements ActivityStream.WatchActivity on b: the returned channel
// receives a value after each Notify (coalesced) and is closed when done
// is closed.
func (b *Broadcast) Watch(done <-chan struct{}) <-chan struct{} {
	ch := make(chan struct{}, 1)
	b.mu.Lock()
	if b.chs == nil {
		b.chs = map[chan struct{}]struct{}{}
	}
	b.chs[ch] = struct{}{}
	b.mu.Unlock()
	out := make(chan struct{})
	go func() {
		defer close(out)
		defer func() {
			b.mu.Lock()
			delete(b.chs, ch)
			b.mu.Unlock()
		}()
		for {
			select {
			case <-done:
				return
			case <-ch:
				select {
				case out <- struct{}{}:
				case <-done:
					return
				}
			}
		}
	}()
	return out
}
