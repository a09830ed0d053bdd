"""The HTTP calls to Prometheus: one range query or instant query each, no retries (the
next run asks again)."""

from __future__ import annotations

from dataclasses import dataclass

import aiohttp

from app.recommend.prometheus_query import AnswerError, Sample, Series, parse_matrix, parse_vector

#: One query's whole budget: a Prometheus slower than this is unreachable for this run.
QUERY_TIMEOUT = aiohttp.ClientTimeout(total=60, sock_connect=5)


class Unreachable(Exception):
    """No answer from Prometheus (refused, timed out, not an API at that URL)."""


@dataclass(frozen=True, slots=True)
class PrometheusApi:
    """Queries against one Prometheus base URL over an open session."""

    session: aiohttp.ClientSession
    base_url: str
    timeout: aiohttp.ClientTimeout = QUERY_TIMEOUT

    async def _get(self, path: str, params: dict[str, str]) -> bytes:
        url = self.base_url.rstrip("/") + path
        try:
            async with self.session.get(url, params=params, timeout=self.timeout) as response:
                body = await response.read()
                # 400 and 422 carry Prometheus's own error (a bad query); other codes mean
                # whatever answered is not a working Prometheus API.
                if response.status in (400, 422) or response.status == 200:
                    return body
                raise Unreachable(f"{url} answered HTTP {response.status}")
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise Unreachable(f"{url}: {type(exc).__name__}: {exc}".rstrip(": ")) from None

    async def query_range(
        self, query: str, start: float, end: float, step_s: float
    ) -> list[Series]:
        """A range query's series; a refused query raises AnswerError."""
        body = await self._get(
            "/api/v1/query_range",
            {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step_s:g}"},
        )
        return parse_matrix(body)

    async def query(self, query: str, at: float) -> list[Sample]:
        """An instant query's samples; a refused query raises AnswerError."""
        return parse_vector(await self._get("/api/v1/query", {"query": query, "time": f"{at:.3f}"}))


__all__ = ["AnswerError", "PrometheusApi", "Unreachable"]
