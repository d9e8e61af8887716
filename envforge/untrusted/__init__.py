"""How the host touches what someone else could have shaped: the one rule for a file whose path
a port, an agent or a workspace could have shaped (``regular``), the files users and ports hand
envforge (``input_files``: size caps, TOML nesting depth), a port's own files (``port_files``),
a sandbox's logs (``sandbox_logs``), text such a side wrote, shown as data (``shown``), the
scratch names the host owns (``owned_names``) and the processes it leaves behind (``orphans``).

It sits in the lowest layer because the drivers, the sandbox and every workflow need it; each
module states the rule it keeps.
"""
