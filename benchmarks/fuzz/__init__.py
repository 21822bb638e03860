"""The fuzzer of issue 14: valid requests of every API and version, mutated, sent at the broker.

- ``requests``: a valid request of any (api, version) from ``protocol/apis.py``, its field values drawn per kio's
  schema (from small pools of group ids, topics and member ids, so that handlers get past "unknown group"),
  encoded with kio while the byte ranges of every primitive write are noted (the mutations aim at them).
- ``mutate``: what a broken or hostile client does to such a frame (bit flips, insertions, deletions, truncation,
  inflated lengths, nulls where a length goes, huge counts, random tagged fields, a gzip flag on a plain batch).
- ``guard``: a worker process under ``RLIMIT_AS`` that decodes frames and runs them through the handlers on a
  manual clock, so a crash, a huge allocation or a stall is a finding, not the end of the fuzzing process.
- ``live``: the campaign over real sockets against a broker process (``python -m benchmarks.fuzz``).

``tests/fuzz`` drives the same code with hypothesis (fixed seed, a few thousand cases); the campaign drives it
with ``random.Random(seed)``. See benchmarks/README.md, "Fuzzing".
"""
