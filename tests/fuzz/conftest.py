"""Hypothesis keeps its files (example database, caches) out of the working tree."""

from __future__ import annotations

import tempfile

from hypothesis.configuration import set_hypothesis_home_dir

set_hypothesis_home_dir(tempfile.mkdtemp(prefix="perdure-hypothesis-"))
