"""The simulation behind ``python -m broker.analytics.generate``: one broker's groups, their consumers, its log.

Driving the real coordinator is exact but two orders of magnitude too slow for logs of millions of events, so
this is a small discrete-event simulation of the same state machine (``broker/coordinator/coordinator.py``, after
Kafka's ``GroupCoordinator``) and of the clients around it, emitting the same events with the same fields in the
same causal order within one step. One concern per module; the simulated broker is one object built in layers
(``LogWriter`` <- ``Coordinator`` <- ``SimulatedBroker``), so that its hot paths stay plain attribute accesses:

- ``world``: the topics, the groups, their members and consumer processes, the chances of things;
- ``lines``: ``LogWriter``, one broker's file: records numbered within a run, rendered and written in batches;
- ``assignment``: what the group leader assigns (range, or cooperative-sticky with its revocations, KIP-429);
- ``coordinator``: ``Coordinator(LogWriter)``, the coordinator's rules for requests and timers;
- ``scenario``: ``SimulatedBroker(Coordinator)``, what happens to the consumers and to the broker, and the loop.

No Spark here: generation must not need it.
"""
