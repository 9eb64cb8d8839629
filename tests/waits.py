"""How long a test waits for something that should happen, shared by every test that waits.

`HANG_GUARD_S` is a hang guard, not a measurement: only a stuck run (a job that never ends, a
thread that never gets the lock) waits it out; no assertion depends on it, and a busy machine
(slow to schedule slurmctld, Ray's processes, the accounting daemon) stays well inside it.
"""

HANG_GUARD_S = 120
