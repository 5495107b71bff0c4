"""CallBatch: the first call of a key goes at once; the calls of the key made while it
is in flight go together after it (at most `limit` per send), in call order; each caller
gets its own answer, a failed send fails exactly the calls it carried."""

from __future__ import annotations

import asyncio

import pytest

from fleet.core.call_batch import CallBatch


async def test_one_send_per_key_and_limit_in_call_order() -> None:
    sent: list[tuple[str, list[int]]] = []

    async def send(key: str, items: list[int]) -> list[int]:
        sent.append((key, items))
        await asyncio.sleep(0)  # in flight for a moment, like a round trip
        return [i * 10 for i in items]

    batch: CallBatch[str, int, int] = CallBatch(send, limit=3)
    answers = await asyncio.gather(*(batch.add("a" if i % 2 else "b", i) for i in range(8)))
    assert answers == [i * 10 for i in range(8)]
    # 0 and 1 fly at once; the others waited and go after them, 3 per send at most
    assert sent == [("b", [0]), ("a", [1]), ("b", [2, 4, 6]), ("a", [3, 5, 7])]
    assert await batch.add("a", 9) == 90  # alone: straight through
    assert sent[-1] == ("a", [9])


async def test_a_failed_send_fails_only_its_calls() -> None:
    async def send(key: str, items: list[int]) -> list[int]:
        await asyncio.sleep(0)
        if key == "bad":
            raise RuntimeError("no")
        return items

    batch: CallBatch[str, int, int] = CallBatch(send, limit=10)
    good, bad = await asyncio.gather(
        asyncio.gather(*(batch.add("good", i) for i in range(3))),
        asyncio.gather(*(batch.add("bad", i) for i in range(3)), return_exceptions=True),
    )
    assert good == [0, 1, 2]
    assert all(isinstance(r, RuntimeError) for r in bad)
    with pytest.raises(RuntimeError):
        await batch.add("bad", 1)
