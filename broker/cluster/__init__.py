"""Several nodes in one process (issue 29; cluster-and-durability.md): which node leads which partition, which node
coordinates which group and transactional id, and what moves when a node stops.

``hashing`` is Kafka's ``partitionFor``; ``layout`` the pure state of the nodes, the leaders and their epochs
(no I/O, time from the caller); ``routing`` what one node answers a request for a key it may not own. The server
(broker/server/nodes.py) binds each node's listeners and applies what ``layout`` decides.
"""
