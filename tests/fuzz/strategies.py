"""Hypothesis strategies for the value domain (protocol/_budget.py, docs/edge.md)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from perdure.protocol._budget import MAX_INT_BITS

# Text as UTF-8 carries it: no lone surrogates (category Cs).
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)
_LIMIT = 2**MAX_INT_BITS - 1
INTS = st.one_of(
    st.integers(-(2**64), 2**64),
    st.integers(-_LIMIT, _LIMIT),
    st.sampled_from([2**53 - 1, 2**53, -(2**53), 2**63, _LIMIT, -_LIMIT, 0]),
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    INTS,
    st.floats(allow_nan=False, allow_infinity=False),
    TEXT,
    st.binary(max_size=40),
)


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(TEXT, children, max_size=5),
    )


VALUES = st.recursive(SCALARS, _containers, max_leaves=25)
"""Values inside the domain: what perdure accepts and can send back in every encoding."""
