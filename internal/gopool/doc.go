// Package gopool runs short tasks on goroutines that outlive one task, so
// that a busy server's request handlers keep the stacks they grew instead
// of growing a fresh one (by copying) for every request. It bounds only
// how many goroutines wait idle, never how many run: a task never waits
// for a goroutine.
//
// It must never block a caller of Go, and never keep an idle goroutine
// past its idle timeout.
package gopool
