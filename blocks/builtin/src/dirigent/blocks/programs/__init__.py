"""Program engines that hold the interpreter, run in child processes the worker can kill.

A jq program runs in C while holding the GIL: in the worker's process, a slow one stalled
every other attempt, the lease heartbeat and the step timeout itself (which could never fire).
Here each evaluation goes to a child process from a small reused pool; when the step times
out (the engine cancels the call) the child is killed and replaced, and the worker's event
loop never waits on the program.
"""
