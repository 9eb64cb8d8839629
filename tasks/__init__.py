"""Prefect tasks: a decorator and one call into `judgeflow` each.

Every flow imports this package, so importing it sends judgeflow's log records made in a flow or
task run to that run's logs (`run_logs`), in whichever process the run happens.
"""

from tasks.run_logs import route_core_logs

route_core_logs()
