"""The classic group protocol: JoinGroup, SyncGroup, Heartbeat and LeaveGroup (Kafka's ``classic`` package).

The data (``state``, ``member``, ``group``) knows what a group is and which changes are legal; ``groups`` holds
them and the changes every handler makes alike; the handlers (``join``, ``sync``, ``leave``, ``sessions``,
``admin``) each own one request or timer, and ``rebalance`` the join and sync phases they all drive.
"""
