"""GPUs of every node, from the Prometheus a fleet already runs (DCGM exporter or nvitop-exporter).

A multi-node launch has GPUs on hosts eaglebug does not run on. Instead of an agent of its own,
it asks Prometheus' HTTP API (`/api/v1/query`, instant queries, bounded in time) for the
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

import json
import math
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from eaglebug.checks import DEFAULT_RULES
from eaglebug.gpu.snapshot import BoxSnapshot, GpuSnapshot, Serving

ENV_URL = "EAGLEBUG_PROMETHEUS"
MIB = 2**20
QUERY_TIMEOUT_S = 2.0
# A series whose newest sample is older than this is stale (Prometheus keeps answering with
# it for its 5-minute lookback; an exporter that stopped reporting is not "ok" for that long).
STALE_AFTER_S = 30.0
FORGET_AFTER_S = 3600.0  # a node gone this long leaves the screen


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
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in {"http", "https"} or not parsed.netloc:
            raise ValueError(f"{url!r}: not an http(s) URL of a Prometheus server")
        self.url = url.rstrip("/")
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
        """An instant query's vector; `PrometheusError` with one line of why, if it fails."""
        address = f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
        try:
            with urllib.request.urlopen(address, timeout=self.timeout_s) as response:
                data = json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            raise PrometheusError(f"{self.url} answered HTTP {exc.code} to a query") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise PrometheusError(f"cannot reach Prometheus at {self.url} ({reason})") from None
        except (ValueError, UnicodeDecodeError):
            raise PrometheusError(f"{self.url} did not answer like Prometheus' API") from None
        if not isinstance(data, dict) or data.get("status") != "success":
            error = data.get("error") if isinstance(data, dict) else None
            raise PrometheusError(f"Prometheus refused the query {expr!r}: {error}")
        result = data.get("data", {}).get("result", [])
        return result if isinstance(result, list) else []

    def _series(self, family: Family, metric: str | None) -> Series:
        if metric is None:
            return {}
        out: Series = {}
        for item in self.query(metric):
            labels = item.get("metric", {})
            value = item.get("value", [None, None])
            try:
                number = float(value[1])
            except (TypeError, ValueError, IndexError):
                continue
            if not math.isfinite(number):
                continue
            key = (str(labels.get(family.host, "?")), str(labels.get(family.index, "?")))
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
        used = self._series(family, family.used)
        ages = self._series(family, f"time() - timestamp({family.used})")
        free = self._series(family, family.free)
        total = self._series(family, family.total)
        util = self._series(family, family.util)
        temp = self._series(family, family.temp)
        power = self._series(family, family.power_w)
        seen: set[tuple[str, str]] = set()
        for key, (labels, used_mib) in used.items():
            total_mib = total[key][1] if key in total else None
            if total_mib is None and key in free:
                total_mib = used_mib + free[key][1]
            age = ages[key][1] if key in ages else 0.0
            gpu = GpuSnapshot(
                index=_int(key[1]),
                name=str(labels.get(family.model, "GPU")),
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
                instance = str(item.get("metric", {}).get("instance", "?"))
                try:
                    found.setdefault(instance, {})[key] = float(item["value"][1])
                except (KeyError, IndexError, TypeError, ValueError):
                    continue
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


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return -1


def _opt_int(series: Series, key: tuple[str, str]) -> int | None:
    return round(series[key][1]) if key in series else None
