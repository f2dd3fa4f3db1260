"""Run one fuzz target under atheris (coverage-guided): ``python -m tests.fuzz.run TARGET
[libFuzzer options]``, TARGET one of json, cbor, bare, http, websocket.

For example, an hour on the CBOR decoder, crashes saved under tests/fuzz/regressions/::

    python -m tests.fuzz.run cbor -max_total_time=3600 \\
        -artifact_prefix=tests/fuzz/regressions/cbor-

libFuzzer stops at the first crash and writes the input to ``<artifact_prefix>crash-…``;
exit status 0 means no crash was found in the time given. The run starts from
:func:`tests.fuzz.seeds.seeds` (written to a temporary folder) plus any corpus folder named
in the options, which keeps what the run finds for the next run.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["perdure"]):
    from perdure.protocol.codec import Encoding
    from tests.fuzz.targets import APP_TARGETS, DECODER_TARGETS, decode_anything


def _decoder(enc: Encoding) -> Callable[[bytes], None]:
    return lambda data: decode_anything(data, enc)


def _app(target: str) -> Callable[[bytes], None]:
    from tests.fuzz.harness import AppHarness

    harness = AppHarness()
    return harness.http if target == "http" else harness.websocket  # type: ignore[return-value]


def main(argv: list[str]) -> None:
    target = argv[1] if len(argv) > 1 else ""
    if target in DECODER_TARGETS:
        one_input = _decoder(target)  # type: ignore[arg-type]
    elif target in APP_TARGETS:
        one_input = _app(target)
    else:
        sys.exit(f"usage: python -m tests.fuzz.run {{{'|'.join(DECODER_TARGETS + APP_TARGETS)}}}")
    options = argv[2:]
    with tempfile.TemporaryDirectory(prefix=f"perdure-fuzz-{target}-") as corpus:
        # libFuzzer writes what it finds to the first folder: the caller's if given.
        options.append(_seed(Path(corpus), target))
        atheris.Setup([argv[0], *options], one_input)
        atheris.Fuzz()


def _seed(folder: Path, target: str) -> str:
    from tests.fuzz.seeds import seeds

    for number, data in enumerate(seeds(target)):
        (folder / f"seed-{number}").write_bytes(data)
    return str(folder)


if __name__ == "__main__":
    main(sys.argv)
