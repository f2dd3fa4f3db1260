"""The atheris fuzzers, time-bounded, in the suite; and every saved crash, replayed.

Each target runs in its own process for :data:`SECONDS` (all at once); a crash fails the
test and libFuzzer saves the input under ``tests/fuzz/regressions/<target>-crash-…``,
which :func:`test_saved_crash_stays_fixed` then replays on every run. Longer runs:
docs/edge.md, "Fuzzing".
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzz.harness import AppHarness
from tests.fuzz.seeds import seeds
from tests.fuzz.targets import APP_TARGETS, DECODER_TARGETS, TARGETS, decode_anything

SECONDS = 3
REGRESSIONS = Path(__file__).parent / "regressions"
ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def fuzz_runs() -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    """Every target fuzzing at the same time, so the whole costs about SECONDS."""
    runs = {
        target: subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.fuzz.run",
                target,
                f"-max_total_time={SECONDS}",
                "-timeout=10",
                "-rss_limit_mb=1024",
                f"-artifact_prefix={REGRESSIONS}/{target}-",
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for target in TARGETS
    }
    try:
        yield runs
    finally:
        for run in runs.values():
            if run.poll() is None:
                run.kill()
            run.wait(10)


# atheris is in the dev extra on Linux, the only platform it has wheels for.
@pytest.mark.skipif(find_spec("atheris") is None, reason="atheris is not installed")
@pytest.mark.parametrize("target", TARGETS)
def test_fuzzer_finds_no_crash(fuzz_runs: dict[str, subprocess.Popen[bytes]], target: str) -> None:
    output, _ = fuzz_runs[target].communicate(timeout=SECONDS + 40)
    text = output.decode("utf-8", "replace")
    assert fuzz_runs[target].returncode == 0, text[-4000:]
    assert "Done " in text  # it ran, and stopped on time


def _saved() -> list[Path]:
    return sorted(p for p in REGRESSIONS.iterdir() if p.name.split("-")[0] in TARGETS)


@pytest.fixture(scope="module")
def app() -> Iterator[AppHarness]:
    harness = AppHarness()
    try:
        yield harness
    finally:
        harness.close()


@pytest.mark.parametrize("path", _saved(), ids=lambda p: p.name)
def test_saved_crash_stays_fixed(path: Path, app: AppHarness) -> None:
    target = path.name.split("-")[0]
    replay(target, path.read_bytes(), app)


@pytest.mark.parametrize("target", TARGETS)
def test_seeds_pass(target: str, app: AppHarness) -> None:
    """The starting corpus is valid: a target that failed on it could find nothing."""
    for data in seeds(target):
        replay(target, data, app)


@pytest.mark.parametrize("target", APP_TARGETS)
@settings(database=None, max_examples=60, deadline=None)
@given(data=st.data())
def test_mangled_seeds_through_the_app(target: str, app: AppHarness, data: st.DataObject) -> None:
    """Without atheris too: valid requests and frames, cut and with one byte changed."""
    seed = data.draw(st.sampled_from(seeds(target)))
    at = data.draw(st.integers(0, max(len(seed) - 1, 0)))
    byte = data.draw(st.integers(0, 255))
    replay(target, seed[:at], app)
    replay(target, seed[:at] + bytes([byte]) + seed[at + 1 :], app)


def replay(target: str, data: bytes, app: AppHarness) -> None:
    if target in DECODER_TARGETS:
        decode_anything(data, target)  # type: ignore[arg-type]
    elif target == "http":
        app.http(data)
    else:
        assert target in APP_TARGETS
        app.websocket(data)
