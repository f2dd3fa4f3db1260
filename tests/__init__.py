"""perdure's tests.

- Unit tests (in process) mirror ``src/perdure``: ``tests/<package path>/test_<module>.py``.
  A file named after a topic tests a package through its face (here: test_arguments for
  ``_names`` and ``_time``, test_porting for ported code, test_layers and test_rooms for
  the shape of the source tree).
- ``scenarios/<topic>/``: end to end, over real ``perdure serve`` processes.
- ``fuzz/``: the fuzzers of the decoders and of the HTTP/WebSocket app, with saved crashes.
- ``bench/``: the benches' own helpers. ``support/``: what the tests share.
"""
