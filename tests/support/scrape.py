"""Reading ``/metrics`` in tests: the exposition parsed by prometheus_client's parser."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

__all__ = ["Samples", "scrape"]


class Samples:
    """The samples of one scrape, looked up by sample name and labels."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.values: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                self.values[(sample.name, frozenset(sample.labels.items()))] = sample.value

    def get(self, name: str, **labels: str) -> float:
        """The value of the sample ``name{labels}`` (exactly those labels); 0 if absent."""
        return self.values.get((name, frozenset(labels.items())), 0.0)

    def total(self, name: str, **labels: str) -> float:
        """The sum of the samples ``name`` whose labels include ``labels``."""
        wanted = set(labels.items())
        return sum(
            value
            for (sample, sample_labels), value in self.values.items()
            if sample == name and wanted <= sample_labels
        )


async def scrape(http: httpx.AsyncClient, url: str = "/metrics", **headers: str) -> Samples:
    """GET ``url`` (expected to answer 200 with the text format) and parse it."""
    response = await http.get(url, headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=")
    return Samples(response.text)
