"""Realistic example events for the profiles in ``config/`` (deterministic for a given seed).

Each generator yields ``(key, event)`` pairs; events are plain dicts ready for orjson, around
200-400 bytes encoded. Timestamps are epoch milliseconds starting at ``start_ms`` and increasing.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["EXAMPLES", "Example", "generate"]

_EVENTS = ("cpu_load", "mem_used", "disk_io", "net_rx", "login_fail", "gc_pause")
_LEVELS = ("INFO", "INFO", "INFO", "WARN", "ERROR")
_PLATFORMS = ("Taobao", "Tmall", "JD", "Pinduoduo")
_CITIES = ("Hangzhou", "Shanghai", "Beijing", "Shenzhen", "Chengdu", "Wuhan")


def _logs(rng: random.Random, i: int, ts: int) -> tuple[bytes, dict[str, Any]]:
    host = f"web{rng.randrange(1, 25):02d}"
    ev = rng.choice(_EVENTS)
    return host.encode(), {
        "hostname": host, "log_event": ev, "timestamp": ts, "level": rng.choice(_LEVELS),
        "value": round(rng.uniform(0, 100), 3), "dc": rng.choice(("eu-1", "us-2", "ap-3")),
        "message": f"{ev} sample {i} from {host}: " + "x" * rng.randrange(60, 140),
        "tags": {"service": rng.choice(("api", "auth", "search", "cart")), "pid": rng.randrange(1000, 65000)},
    }


def _orders(rng: random.Random, i: int, ts: int) -> tuple[bytes, dict[str, Any]]:
    order = f"ORD{i:010d}"
    items = [{"sku": f"SKU{rng.randrange(10**6):06d}", "qty": rng.randrange(1, 4)} for _ in range(rng.randrange(1, 4))]
    return order.encode(), {
        "order_number": order, "seller_id": f"s{rng.randrange(500):04d}", "buyer_id": f"b{rng.randrange(20000):05d}",
        "timestamp": ts, "amount_cents": rng.randrange(100, 500_000), "currency": "CNY",
        "platform": rng.choice(_PLATFORMS), "city": rng.choice(_CITIES), "items": items,
        "note": "gift wrap" if rng.random() < 0.1 else "",
    }


def _user_orders(rng: random.Random, i: int, ts: int) -> tuple[bytes, dict[str, Any]]:
    user = f"u{rng.randrange(50_000):06d}"
    return user.encode(), {
        "user_id": user, "order_id": f"o{i:012d}", "ts": ts, "amount_cents": rng.randrange(100, 100_000),
        "status": rng.choice(("paid", "shipped", "delivered", "refunded")), "city": rng.choice(_CITIES),
        "payment": {"method": rng.choice(("card", "wallet", "transfer")), "installments": rng.randrange(1, 4)},
        "comment": "y" * rng.randrange(40, 160),
    }


def _logins(rng: random.Random, i: int, ts: int) -> tuple[bytes, dict[str, Any]]:
    import datetime as _dt

    user = f"u{rng.randrange(2000):05d}"
    day = _dt.datetime.fromtimestamp(ts / 1000, tz=_dt.UTC).strftime("%Y%m%d")
    return user.encode(), {
        "login_id": f"L{i:012d}", "user_id": user, "timestamp": ts, "day": day,
        "ip": f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(256)}",
        "agent": rng.choice(("ios", "android", "web", "desktop")), "success": rng.random() > 0.05,
        "session": "z" * rng.randrange(40, 120),
    }


Example = Callable[[random.Random, int, int], tuple[bytes, dict[str, Any]]]

EXAMPLES: dict[str, tuple[str, Example]] = {
    "logs": ("logs", _logs),
    "transactions": ("orders", _orders),
    "user-orders": ("user-orders", _user_orders),
    "logins": ("logins", _logins),
}


def generate(name: str, count: int, *, seed: int = 7, start_ms: int = 1_763_769_600_000,
             step_ms: int = 37) -> Iterator[tuple[bytes, dict[str, Any]]]:
    """``count`` events of example ``name`` (see :data:`EXAMPLES`)."""
    try:
        _, fn = EXAMPLES[name]
    except KeyError:
        raise ValueError(f"unknown example {name!r}; known: {', '.join(sorted(EXAMPLES))}") from None
    rng = random.Random(seed)
    for i in range(count):
        yield fn(rng, i, start_ms + i * step_ms + rng.randrange(step_ms))
