"""GPUs of every node, from the Prometheus a fleet already runs (DCGM exporter or nvitop-exporter).

A multi-node launch has GPUs on hosts eaglebug does not run on. Instead of an agent of its own,
it asks Prometheus' HTTP API (`/api/v1/query`, instant queries through the one HTTP client,
`eaglebug/net`: a deadline and a size cap each) for the
exporter families it knows, detects which one is there, and builds the same `BoxSnapshot` as
the NVML source, each GPU tagged with its node (`host`). A node whose series go stale or vanish
stays on the screen as `stale` with how long ago it last reported; an unreachable Prometheus is
the snapshot's `unavailable` line, never an exception.

Exporters (names and units as they publish them):
- NVIDIA dcgm-exporter: `DCGM_FI_DEV_FB_USED` / `DCGM_FI_DEV_FB_FREE` (MiB),
  `DCGM_FI_DEV_GPU_UTIL` (%), `DCGM_FI_DEV_GPU_TEMP` (C), `DCGM_FI_DEV_POWER_USAGE` (W);
  labels `Hostname`, `gpu`, `UUID`, `modelName`.
- nvitop-exporter (prometheus_client gauges with units): `gpu_memory_used_MiB`,
  `gpu_memory_total_MiB`, `gpu_utilization_Percentage`, `gpu_temperature_C`,
  `gpu_power_usage_W`; labels `hostname`, `index`, `uuid`, `devicename`.
"""

from __future__ import annotations

import os
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from eaglebug.checks import (
    DEFAULT_RULES,
    NotJson,
    accept_length,
    accept_rate,
    float_text,
    int_text,
    strict_json,
)
from eaglebug.gpu.snapshot import BoxSnapshot, GpuSnapshot, Serving
from eaglebug.net.fetch import HttpFailure, checked_url, fetch

ENV_URL = "EAGLEBUG_PROMETHEUS"
MIB = 2**20
QUERY_TIMEOUT_S = 2.0
# A series whose newest sample is older than this is stale (Prometheus keeps answering with
# it for its 5-minute lookback; an exporter that stopped reporting is not "ok" for that long).
STALE_AFTER_S = 30.0
FORGET_AFTER_S = 3600.0  # a node gone this long leaves the screen
# What a reading can be (read with the one number reader; outside these it is no reading):
MEMORY_MIB = (0.0, 2.0**30)  # up to 1 PiB per GPU
PERCENT = (0.0, 100.0)
CELSIUS = (-60.0, 200.0)
WATTS = (0.0, 100_000.0)


@dataclass(frozen=True)
class Family:
    """One exporter's metric names, labels and memory unit."""

    name: str
    used: str
    free: str | None
    total: str | None
    util: str
    temp: str
    power_w: str
    host: str
    index: str
    uuid: str
    model: str


DCGM = Family(
    "DCGM exporter",
    used="DCGM_FI_DEV_FB_USED",
    free="DCGM_FI_DEV_FB_FREE",
    total=None,
    util="DCGM_FI_DEV_GPU_UTIL",
    temp="DCGM_FI_DEV_GPU_TEMP",
    power_w="DCGM_FI_DEV_POWER_USAGE",
    host="Hostname",
    index="gpu",
    uuid="UUID",
    model="modelName",
)
NVITOP = Family(
    "nvitop-exporter",
    used="gpu_memory_used_MiB",
    free=None,
    total="gpu_memory_total_MiB",
    util="gpu_utilization_Percentage",
    temp="gpu_temperature_C",
    power_w="gpu_power_usage_W",
    host="hostname",
    index="index",
    uuid="uuid",
    model="devicename",
)
FAMILIES = (DCGM, NVITOP)


class PrometheusError(Exception):
    """Prometheus did not answer, or answered something that is not a query result."""


Series = dict[tuple[str, str], tuple[dict[str, str], float]]  # (host, index) -> labels, value


class PrometheusSource:
    """A `GpuSource` over Prometheus: one instant query per metric, grouped by node."""

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = QUERY_TIMEOUT_S,
        stale_after_s: float = STALE_AFTER_S,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        try:
            self.url = checked_url(url)
        except HttpFailure as exc:
            raise ValueError(f"{exc.message} of a Prometheus server") from None
        self.timeout_s = timeout_s
        self.stale_after_s = stale_after_s
        self._clock = clock
        self._wall = wall_clock
        self.family: Family | None = None
        self._last: dict[tuple[str, str], tuple[GpuSnapshot, float]] = {}  # key -> gpu, seen at
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls, url: str | None) -> PrometheusSource | None:
        given = url or os.environ.get(ENV_URL, "").strip()
        return cls(given) if given else None

    def describe(self) -> str:
        family = f", {self.family.name}" if self.family else ""
        return f"Prometheus {self.url}{family}"

    def close(self) -> None:
        """Nothing is held between queries."""

    # -- the HTTP API ---------------------------------------------------------------------------
    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's vector (its items that are objects); `PrometheusError` with one
        line of why, if it fails or answers something that is not a query result."""
        address = f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
        try:
            data = strict_json(fetch(address, deadline_s=self.timeout_s).body)
        except HttpFailure as exc:
            raise PrometheusError(self._failed(exc)) from None
        except NotJson as exc:
            raise PrometheusError(self._not_api(str(exc))) from None
        if not isinstance(data, dict) or data.get("status") != "success":
            error = data.get("error") if isinstance(data, dict) else None
            raise PrometheusError(f"Prometheus refused the query {expr!r}: {str(error)[:200]}")
        answer = data.get("data")
        result = answer.get("result") if isinstance(answer, dict) else None
        if not isinstance(result, list):
            raise PrometheusError(self._not_api("no result list in its data"))
        return [item for item in result if isinstance(item, dict)]

    def _failed(self, exc: HttpFailure) -> str:
        if exc.kind == "connect":
            return f"cannot reach Prometheus at {self.url} ({exc.reason})"
        if exc.kind == "status":
            return f"{self.url} answered HTTP {exc.status} to a query"
        if exc.kind == "deadline":
            return f"Prometheus at {self.url} gave no whole answer within {self.timeout_s:g} s"
        return self._not_api(exc.reason)

    def _not_api(self, why: str) -> str:
        return f"Prometheus at {self.url} did not answer like Prometheus' API ({why})"

    def _series(
        self, family: Family, metric: str | None, bounds: tuple[float, float] | None = None
    ) -> Series:
        """`metric`'s samples per GPU; a sample whose value is no finite number in `bounds`
        (Prometheus says `NaN`, `+Inf`) or whose labels are not text is left out."""
        if metric is None:
            return {}
        lo, hi = bounds if bounds is not None else (None, None)
        out: Series = {}
        for item in self.query(metric):
            labels = _labels(item.get("metric"))
            value = item.get("value")
            if not isinstance(value, list) or len(value) != 2 or not isinstance(value[1], str):
                continue
            number = float_text(value[1], lo=lo, hi=hi)
            if number is None:
                continue
            key = (labels.get(family.host, "?"), labels.get(family.index, "?"))
            out[key] = (labels, number)
        return out

    def _detect(self) -> Family | None:
        for family in FAMILIES:
            if self.query(f"count({family.used})"):
                return family
        return None

    # -- one look at every node -------------------------------------------------------------
    def sample(self) -> BoxSnapshot:
        now, wall = self._clock(), self._wall()
        try:
            with self._lock:
                return self._sample(now, wall)
        except PrometheusError as exc:
            return BoxSnapshot(now, wall, gpus=self._stale_all(now), unavailable=str(exc))

    def _sample(self, now: float, wall: float) -> BoxSnapshot:
        if self.family is None:
            self.family = self._detect()
        family = self.family
        if family is None:
            return BoxSnapshot(
                now,
                wall,
                unavailable=(
                    f"no GPU exporter's series in Prometheus at {self.url} "
                    f"(looked for {DCGM.used} and {NVITOP.used})"
                ),
            )
        used = self._series(family, family.used, MEMORY_MIB)
        ages = self._series(family, f"time() - timestamp({family.used})")
        free = self._series(family, family.free, MEMORY_MIB)
        total = self._series(family, family.total, MEMORY_MIB)
        util = self._series(family, family.util, PERCENT)
        temp = self._series(family, family.temp, CELSIUS)
        power = self._series(family, family.power_w, WATTS)
        seen: set[tuple[str, str]] = set()
        for key, (labels, used_mib) in used.items():
            total_mib = total[key][1] if key in total else None
            if total_mib is None and key in free:
                total_mib = used_mib + free[key][1]
            age = ages[key][1] if key in ages else 0.0
            gpu = GpuSnapshot(
                index=_int(key[1]),
                name=labels.get(family.model, "GPU"),
                uuid=labels.get(family.uuid),
                used_bytes=round(used_mib * MIB),
                total_bytes=round((total_mib or 0) * MIB),
                utilization_pct=_opt_int(util, key),
                temperature_c=_opt_int(temp, key),
                power_mw=round(power[key][1] * 1000) if key in power else None,
                host=key[0],
            )
            if age > self.stale_after_s:
                gpu = replace(gpu, state="stale", stale_s=age)
            self._last[key] = (gpu, now - age)
            seen.add(key)
        gpus = [self._last[k][0] for k in seen]
        gpus += [g for g in self._stale_all(now) if (g.host or "", str(g.index)) not in seen]
        gpus.sort(key=lambda g: (g.host or "", g.index))
        return BoxSnapshot(now, wall, gpus=tuple(gpus), serving=self._serving())

    def _serving(self) -> tuple[Serving, ...]:
        """SGLang's acceptance gauges (the names `checks.acceptance` knows) per scraped
        server; none when no server exports them (no --enable-metrics, no speculative run)."""
        found: dict[str, dict[str, float]] = {}
        for key, metric in (
            ("length", DEFAULT_RULES.metric_length),
            ("rate", DEFAULT_RULES.metric_rate),
        ):
            for item in self.query(f"avg by (instance) ({metric})"):
                instance = _labels(item.get("metric")).get("instance", "?")
                value = item.get("value")
                text = value[1] if isinstance(value, list) and len(value) == 2 else None
                number = float_text(text) if isinstance(text, str) else None
                reading = accept_length(number) if key == "length" else accept_rate(number)
                if reading is not None:  # a NaN gauge, -3 or +Inf is not a reading
                    found.setdefault(instance, {})[key] = reading
        return tuple(
            Serving(instance, values.get("length"), values.get("rate"))
            for instance, values in sorted(found.items())
        )

    def _stale_all(self, now: float) -> tuple[GpuSnapshot, ...]:
        """Every node seen before, as it last was, marked stale with its age."""
        out = []
        for key, (gpu, seen_at) in list(self._last.items()):
            age = now - seen_at
            if age > FORGET_AFTER_S:
                del self._last[key]
                continue
            out.append(replace(gpu, state="stale", stale_s=age, utilization_pct=None))
        return tuple(out)


def _labels(metric: object) -> dict[str, str]:
    """A series' labels that are text (Prometheus' are; a list or an object is no label)."""
    if not isinstance(metric, dict):
        return {}
    return {k: v for k, v in metric.items() if isinstance(k, str) and isinstance(v, str)}


def _int(text: str) -> int:
    found = int_text(text, lo=0, hi=2**31 - 1)
    return found if found is not None else -1


def _opt_int(series: Series, key: tuple[str, str]) -> int | None:
    return round(series[key][1]) if key in series else None
