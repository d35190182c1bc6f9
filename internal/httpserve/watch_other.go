//go:build !linux

package httpserve

import "errors"

// watcher is Linux's alone (epoll): elsewhere a request's context is not
// cancelled when its client goes away, only at a shutdown's end.
type watcher struct{}

func newWatcher() (*watcher, error) { return nil, errors.ErrUnsupported }

func (*watcher) add(int, uint64) error { return errors.ErrUnsupported }
func (*watcher) remove(int)            {}
func (*watcher) run(func(id uint64))   {}
func (*watcher) close()                {}
