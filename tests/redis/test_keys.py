"""Key names are exactly the spec's (pure functions, no Redis)."""

from __future__ import annotations

from fleet.backends.redis import keys


def test_spec_key_names() -> None:
    assert keys.worker_key("scraper", "host1", "hardware") == "wkr:scraper:host1:hardware"
    assert keys.workers_index("scraper") == "wkrs:scraper"
    assert keys.WORKERS_ALL == "wkrs:all"
    assert keys.workers_all_member("scraper", "host1") == "scraper|host1"
    assert keys.stream("scraper") == "stream:scraper"
    assert keys.event_channel("scraper.emit") == "event:scraper.emit"
    assert keys.CATALOG == "fleet:catalog"
    assert keys.pool("cf-cookies") == "fleet:pool:cf-cookies"
    assert keys.pool_claim("cf-cookies", "abc") == "fleet:pool:cf-cookies:claim:abc"
    assert keys.lock("refresh") == "fleet:lock:refresh"
    assert keys.counter("hits") == "fleet:counter:hits"
    assert keys.kv("scraper-inflight", "k1") == "fleet:kv:scraper-inflight:k1"


def test_queue_keys_follow_the_spec_order() -> None:
    qk = keys.queue_keys("t", 7200.5)
    assert qk[0] == "fleet:queue:t"
    assert qk[3:7] == [
        "fleet:queue:t:processing",
        "fleet:queue:t:processing:body",
        "fleet:queue:t:scheduled",
        "fleet:queue:t:dead",
    ]
    assert qk[1:3] == ["fleet:queue:t:high", "fleet:queue:t:low"]
    assert all(k.startswith("fleet:queue:t") for k in qk)
    assert qk[9] == "fleet:queue:t:done:2" and qk[12] == "fleet:queue:t:done:1"
    assert qk[13] == "fleet:queue:t:processing:started"
    assert len(set(qk)) == len(qk)


def test_limiter_keys_never_collide() -> None:
    assert keys.limit_keys("api-key:alpha") == [
        "fleet:limit:api-key:alpha:holders",
        "fleet:limit:api-key:alpha:tat",
    ]
    names = ["a", "a:tat", "a:holders", "a:holders:tat", "a:tat:holders", ""]
    built = [k for name in names for k in keys.limit_keys(name)]
    assert len(set(built)) == len(built)


def test_proxy_keys_never_collide() -> None:
    key = "http://gate.example:7000#3f2a9c01bd"
    assert keys.proxy_keys(key) == [
        f"fleet:proxy:{key}:stats",
        f"fleet:proxy:{key}:places",
    ]
    assert keys.proxy_sticky("acct-1") == "fleet:proxy-sticky:acct-1"
    assert keys.PROXIES == "fleet:proxies"
    names = ["a", "a:stats", "a:places", "a:places:stats", "a:stats:places", ""]
    built = [k for name in names for k in keys.proxy_keys(name)]
    built += [keys.proxy_sticky(name) for name in names] + [keys.PROXIES]
    assert len(set(built)) == len(built)


def test_kv_namespace_with_colon_is_escaped() -> None:
    assert keys.kv("a:b", "c") != keys.kv("a", "b:c")
    assert keys.kv("a%3Ab", "c") != keys.kv("a:b", "c")


def test_tag_suffix_is_canonical_json() -> None:
    assert keys.pool_tag_suffix("site", "example.com") == 'site="example.com"'
    assert keys.pool_tag_suffix("n", {"b": 1, "a": 2}) == 'n={"a":2,"b":1}'
    assert keys.pool_tag_suffix("n", 1) != keys.pool_tag_suffix("n", True)


def test_scan_patterns_escape_glob_characters() -> None:
    assert keys.idempotency_pattern("a*b") == "fleet:queue:a\\*b:idem:*"
    assert keys.config_override_pattern("t") == "fleet:config:t:w:*"
