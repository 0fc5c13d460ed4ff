// Package containerinit is the first process of a weft container: an agent
// starts the weft executable as `weft container-init` in a new PID and mount
// namespace, and Main, as PID 1 there, gives the container a /proc that
// shows only its own processes and a fresh /tmp and /dev/shm, drops to the
// container's account and runs its command as its only child. It forwards
// the agent's signals to the command's process group, reaps every orphan,
// and exits when the command does, which makes the kernel kill whatever
// the command left behind. It tells the agent how the command ended on a
// pipe (a PID 1 cannot die by a signal, so its own exit status cannot say).
//
// The agent's side is Spec (what to run, written to the init on SpecFD) and
// Report (read from StatusFD): ReadStart once the command runs, ReadExit
// when it has ended.
//
// Main must never mount anything unless it is PID 1 of a PID namespace in a
// mount namespace of its own (run by hand it refuses), never run the
// command with more privilege than the account in its Spec, and never let
// the command reach the report pipe.
package containerinit
