"""TurnBatch: the calls of one loop turn go as one send per key (at most `limit` items),
each caller gets its own answer, a failed send fails exactly the calls it carried."""

from __future__ import annotations

import asyncio

import pytest

from fleet.core.turn_batch import TurnBatch


async def test_one_send_per_key_and_limit_in_call_order() -> None:
    sent: list[tuple[str, list[int]]] = []

    async def send(key: str, items: list[int]) -> list[int]:
        sent.append((key, items))
        return [i * 10 for i in items]

    batch: TurnBatch[str, int, int] = TurnBatch(send, limit=3)
    answers = await asyncio.gather(*(batch.add("a" if i % 2 else "b", i) for i in range(8)))
    assert answers == [i * 10 for i in range(8)]
    assert sent == [("b", [0, 2, 4]), ("a", [1, 3, 5]), ("b", [6]), ("a", [7])]
    assert await batch.add("a", 9) == 90  # alone in its turn
    assert sent[-1] == ("a", [9])


async def test_a_failed_send_fails_only_its_calls() -> None:
    async def send(key: str, items: list[int]) -> list[int]:
        if key == "bad":
            raise RuntimeError("no")
        return items

    batch: TurnBatch[str, int, int] = TurnBatch(send, limit=10)
    good, bad = await asyncio.gather(
        asyncio.gather(*(batch.add("good", i) for i in range(3))),
        asyncio.gather(*(batch.add("bad", i) for i in range(3)), return_exceptions=True),
    )
    assert good == [0, 1, 2]
    assert all(isinstance(r, RuntimeError) for r in bad)
    with pytest.raises(RuntimeError):
        await batch.add("bad", 1)
