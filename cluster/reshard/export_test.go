package reshard

import "time"

// What the tests of package reshard_test (which open a store to put load
// on a move) need of the package's internals.

// WithHook returns opt with hook called at each step of the move ("copy",
// "logging", "copied", "catch-up N", "checked", "held", "final", "final
// applied N" (shard N's last changes applied while held), "verified",
// "finish", "finishing", "kept", "revert", "reverted"): an error from it
// stops the move there, as a kill would.
func WithHook(opt Options, hook func(step string) error) Options {
	opt.hook = hook
	return opt
}

// WithProgressEvery returns opt printing its progress every d.
func WithProgressEvery(opt Options, d time.Duration) Options {
	opt.every = d
	return opt
}

const StepAborted = stepAborted
